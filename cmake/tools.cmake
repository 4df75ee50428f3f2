# The administrator's tools besides mkfpgalz4fs (fsck.fpgalz4fs, fpgalz4fs-stat). Both are
# thin front ends of fs/chk.c in the core library, so they read files as the daemon does.
# What all three tools share on the command line lives in tools/tl_util.c; the in-place
# conversion of a file that mkfpgalz4fs --compress-existing and fsck.fpgalz4fs --convert
# share, in tools/tl_convert.c.
add_library(fpgalz4fs_tools STATIC tools/tl_util.c tools/tl_convert.c)
target_include_directories(fpgalz4fs_tools PUBLIC tools)
target_link_libraries(fpgalz4fs_tools PUBLIC fpgalz4fs_core)

add_executable(fsck.fpgalz4fs tools/fsck.fpgalz4fs.c)
target_link_libraries(fsck.fpgalz4fs PRIVATE fpgalz4fs_core fpgalz4fs_tools)

add_executable(fpgalz4fs-stat tools/fpgalz4fs-stat.c)
target_link_libraries(fpgalz4fs-stat PRIVATE fpgalz4fs_core fpgalz4fs_tools)

# mkfpgalz4fs itself is defined in the top CMakeLists.txt, before this file is included.
target_link_libraries(mkfpgalz4fs PRIVATE fpgalz4fs_tools)
