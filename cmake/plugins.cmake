# Accelerator backends, each a shared object the engine opens at run time (dlopen), so that
# the daemon runs on hosts without XRT or CUDA. Each is built only when its toolkit is found.
# A plugin is named fpgalz4fs-NAME.so, sits next to the daemon in the build tree and in
# ${CMAKE_INSTALL_LIBDIR}/fpgalz4fs when installed.
include(${CMAKE_CURRENT_LIST_DIR}/xrt.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/cuda.cmake)
