# Writes chstate.pc and chstate-http.pc (templates cmake/chstate.pc.in and
# cmake/chstate-http.pc.in) and installs them to ${CMAKE_INSTALL_LIBDIR}/pkgconfig.
#
# Boost ships no .pc file on Debian, so chstate.pc names Boost's libraries
# itself (-lboost_json -lboost_url), adding -I/-L only for a Boost outside the
# compiler's default paths. OpenSSL does ship one: chstate-http.pc requires it.
function(chstate_write_pkg_config)
    set(pc_dir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
    # prefix relative to the .pc file's folder (pkg-config's ${pcfiledir}),
    # so the files stay right under any `cmake --install --prefix`.
    if(IS_ABSOLUTE "${pc_dir}")
        set(CHSTATE_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
    else()
        file(RELATIVE_PATH rel "/chstate-prefix/${pc_dir}" "/chstate-prefix")
        string(REGEX REPLACE "/$" "" rel "${rel}")
        set(CHSTATE_PC_PREFIX "\${pcfiledir}/${rel}")
    endif()
    if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
        set(CHSTATE_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
    else()
        set(CHSTATE_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
    endif()

    # A Boost outside the default search paths: say where it is.
    set(CHSTATE_PC_BOOST_CFLAGS "")
    set(CHSTATE_PC_BOOST_LIBS "")
    get_target_property(boost_includes Boost::headers INTERFACE_INCLUDE_DIRECTORIES)
    foreach(dir IN LISTS boost_includes)
        if(dir AND NOT dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES AND NOT dir STREQUAL "/usr/include")
            string(APPEND CHSTATE_PC_BOOST_CFLAGS " -I${dir}")
        endif()
    endforeach()
    set(boost_json_file "")
    foreach(prop IMPORTED_LOCATION IMPORTED_LOCATION_RELEASE IMPORTED_LOCATION_NOCONFIG IMPORTED_LOCATION_DEBUG)
        get_target_property(loc Boost::json ${prop})
        if(loc)
            set(boost_json_file "${loc}")
            break()
        endif()
    endforeach()
    if(boost_json_file)
        get_filename_component(boost_libdir "${boost_json_file}" DIRECTORY)
        if(NOT boost_libdir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
            set(CHSTATE_PC_BOOST_LIBS "-L${boost_libdir} ")
        endif()
    endif()

    configure_file(${PROJECT_SOURCE_DIR}/cmake/chstate.pc.in ${PROJECT_BINARY_DIR}/chstate.pc @ONLY)
    configure_file(${PROJECT_SOURCE_DIR}/cmake/chstate-http.pc.in ${PROJECT_BINARY_DIR}/chstate-http.pc @ONLY)
    install(FILES ${PROJECT_BINARY_DIR}/chstate.pc ${PROJECT_BINARY_DIR}/chstate-http.pc DESTINATION ${pc_dir})
endfunction()
