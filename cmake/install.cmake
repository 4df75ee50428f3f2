# Install rules; packaging/ builds the Debian packages from these, so `cmake --install`
# and the packages put every file in the same place.
#
# Targets defined elsewhere (cmake/tools.cmake, cmake/plugins.cmake) are installed only when
# they exist in this build: the XRT plugin, for one, is built only where libxrt-dev is found.

install(TARGETS fpgalz4fs mkfpgalz4fs fpgalz4fs-bench
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

foreach(tool fsck.fpgalz4fs fpgalz4fs-stat fpgalz4fs-mkxclbin)
  if(TARGET ${tool})
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

# The engine opens the accelerator backends with dlopen from this directory.
set(FPGALZ4FS_PLUGIN_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/fpgalz4fs)
foreach(plugin fpgalz4fs-xrt fpgalz4fs-cuda)
  if(TARGET ${plugin})
    install(TARGETS ${plugin} LIBRARY DESTINATION ${FPGALZ4FS_PLUGIN_INSTALL_DIR})
  endif()
endforeach()

# Man pages: section from the file name (NAME.SECTION). A command's page is installed with
# the command, so that a build without the XRT plugin ships no page for fpgalz4fs-mkxclbin.
set(FPGALZ4FS_MAN_PAGES
    fpgalz4fs.8 mkfpgalz4fs.8 fpgalz4fs-bench.1 fsck.fpgalz4fs.8 fpgalz4fs-stat.1
    fpgalz4fs-mkxclbin.1)
foreach(page ${FPGALZ4FS_MAN_PAGES})
  string(REGEX REPLACE "\\.[0-9]$" "" command ${page})
  string(REGEX REPLACE "^.*\\." "" section ${page})
  if(TARGET ${command})
    install(FILES ${PROJECT_SOURCE_DIR}/packaging/man/${page}
            DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
  endif()
endforeach()

# An example mount unit; administrators copy it to /etc/systemd/system and edit it.
install(FILES ${PROJECT_SOURCE_DIR}/packaging/systemd/srv-data.mount
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# The helper mount(8) runs for the type fuse.fpgalz4fs (it looks for it in /sbin only, so it is
# installed with a /usr prefix alone, as the packages do): the daemon of this installation,
# not whichever is first in the PATH mount gives its helpers.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(FPGALZ4FS_HELPER_PATH "${CMAKE_INSTALL_FULL_BINDIR}:/usr/sbin:/usr/bin:/sbin:/bin")
  configure_file(${PROJECT_SOURCE_DIR}/packaging/mount.fuse.fpgalz4fs.in
                 ${PROJECT_BINARY_DIR}/mount.fuse.fpgalz4fs @ONLY)
  install(PROGRAMS ${PROJECT_BINARY_DIR}/mount.fuse.fpgalz4fs
          DESTINATION ${CMAKE_INSTALL_SBINDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/man/mount.fuse.fpgalz4fs.8
          DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
endif()
