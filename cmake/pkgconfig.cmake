# pkgconfig.cmake (included by the top CMakeLists.txt): the two pkg-config files.
#   build/generated/moonshard.pc   installed into LIBDIR/pkgconfig; finds its prefix from its own
#                                  place (${pcfiledir}), so `cmake --install --prefix DIR` works
#   build/moonshard-uninstalled.pc the build tree itself: `pkg-config --with-path build moonshard`
#                                  (pkg-config prefers NAME-uninstalled.pc) compiles against the
#                                  sources' headers and links build/libmoonshard.so
# Libs.private lists what the static archive needs beyond lua5.4 and zlib (their .pc files give
# theirs), so `pkg-config --static --libs moonshard` links libmoonshard.a.

# ms_pc_library(out path): -L<dir> -l<name> for a library file, the name itself otherwise.
function(ms_pc_library out path)
  if(IS_ABSOLUTE "${path}")
    get_filename_component(dir "${path}" DIRECTORY)
    get_filename_component(name "${path}" NAME_WE)
    string(REGEX REPLACE "^lib" "" name "${name}")
    set(${out} "-L${dir} -l${name}" PARENT_SCOPE)
  elseif(path MATCHES "^-")
    set(${out} "${path}" PARENT_SCOPE)
  else()
    set(${out} "-l${path}" PARENT_SCOPE)
  endif()
endfunction()

set(MS_PC_PRIVATE "")
if(MPI_C_FOUND)
  foreach(lib IN LISTS MPI_C_LIBRARIES)
    ms_pc_library(flag "${lib}")
    string(APPEND MS_PC_PRIVATE " ${flag}")
  endforeach()
endif()
if(MS_HAVE_CUDA) # the CUDA runtime, static (cuBLAS, cuDNN and NCCL are dlopen'ed); see CMakeLists.txt
  ms_pc_library(flag "${CUDA_cudart_static_LIBRARY}")
  string(APPEND MS_PC_PRIVATE " ${flag} -lrt -lstdc++")
endif()
foreach(lib IN LISTS CMAKE_DL_LIBS ITEMS pthread m)
  string(APPEND MS_PC_PRIVATE " -l${lib}")
endforeach()
string(STRIP "${MS_PC_PRIVATE}" MS_PC_PRIVATE)

file(RELATIVE_PATH MS_PC_TO_PREFIX "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/moonshard.pc.in ${CMAKE_CURRENT_BINARY_DIR}/generated/moonshard.pc @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/moonshard-uninstalled.pc.in ${CMAKE_CURRENT_BINARY_DIR}/moonshard-uninstalled.pc
               @ONLY)
file(REMOVE ${CMAKE_CURRENT_BINARY_DIR}/moonshard.pc) # the old place of the installed one, wrong in the build tree
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/generated/moonshard.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
