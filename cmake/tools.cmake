# The administrator's tools besides mkfpgalz4fs (fsck.fpgalz4fs, fpgalz4fs-stat).
