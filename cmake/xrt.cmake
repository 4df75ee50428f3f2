# The XRT backend plugin (engine/xrt/) and fpgalz4fs-mkxclbin (kernels/xclbin/), built when libxrt-dev is found.
#
# Debian's libxrt-dev puts the headers in /usr/include/xrt (xrt.h, xclbin.h, xrt/xrt_kernel.h)
# and its xrt.pc names a wrong prefix, so the headers and libxrt_coreutil are looked up
# directly: first under $XILINX_XRT (Xilinx's own packages, /opt/xilinx/xrt), then the system.
# Only the plugin links XRT; the daemon opens it with dlopen and never needs XRT itself.
option(FPGALZ4FS_XRT "Build the XRT backend plugin when XRT is found" ON)

if(FPGALZ4FS_XRT)
  find_path(XRT_INCLUDE_DIR NAMES xrt/xrt_kernel.h
    HINTS $ENV{XILINX_XRT}/include
    PATHS /opt/xilinx/xrt/include
    PATH_SUFFIXES xrt)
  find_library(XRT_COREUTIL_LIBRARY NAMES xrt_coreutil
    HINTS $ENV{XILINX_XRT}/lib
    PATHS /opt/xilinx/xrt/lib)
endif()

if(FPGALZ4FS_XRT AND XRT_INCLUDE_DIR AND XRT_COREUTIL_LIBRARY AND EXISTS "${XRT_INCLUDE_DIR}/xclbin.h")
  message(STATUS "XRT found (${XRT_INCLUDE_DIR}, ${XRT_COREUTIL_LIBRARY}): building fpgalz4fs-xrt.so")
  set(FPGALZ4FS_HAVE_XRT ON)

  # The plugin: the backend and the reference kernel (for xrt_kernel_model=1), self-contained.
  add_library(fpgalz4fs-xrt MODULE engine/xrt/eng_xrt.c engine/xrt/xrt_xclbin.c kernels/krn_lz4.c)
  set_target_properties(fpgalz4fs-xrt PROPERTIES
    PREFIX ""
    C_VISIBILITY_PRESET hidden
    OUTPUT_NAME fpgalz4fs-xrt
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
  target_include_directories(fpgalz4fs-xrt PRIVATE engine kernels engine/xrt)
  # XRT's C headers declare a few functions without prototypes: system headers, no warnings.
  target_include_directories(fpgalz4fs-xrt SYSTEM PRIVATE ${XRT_INCLUDE_DIR})
  target_link_libraries(fpgalz4fs-xrt PRIVATE ${XRT_COREUTIL_LIBRARY} Threads::Threads)

  # The metadata-only xclbin writer, for tests under XRT's noop shim.
  add_executable(fpgalz4fs-mkxclbin kernels/xclbin/mkxclbin.c)
  target_include_directories(fpgalz4fs-mkxclbin SYSTEM PRIVATE ${XRT_INCLUDE_DIR})
else()
  message(STATUS "XRT not found (libxrt-dev): the xrt backend is not built")
  set(FPGALZ4FS_HAVE_XRT OFF)
endif()
