# The administrator's tools besides mkfpgalz4fs (fsck.fpgalz4fs, fpgalz4fs-stat). Both are
# thin front ends of fs/chk.c in the core library, so they read files as the daemon does.
add_executable(fsck.fpgalz4fs tools/fsck.fpgalz4fs.c)
target_link_libraries(fsck.fpgalz4fs PRIVATE fpgalz4fs_core)

add_executable(fpgalz4fs-stat tools/fpgalz4fs-stat.c)
target_link_libraries(fpgalz4fs-stat PRIVATE fpgalz4fs_core)
