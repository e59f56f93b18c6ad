# Precompiled headers for every C++ target (docs/design/dependencies.md, "Build time").
#
# Two headers are built once per build tree, each from an empty translation unit that links
# nothing, so that no target's compile definitions are baked in: GCC uses a precompiled header
# only where every macro defined when it was built is defined the same way, and a target may add
# macros of its own. ty_pch holds the standard library headers most of the tree includes and
# nlohmann/json; ty_pch_test adds GoogleTest and GoogleMock for the unit tests. Every other target
# reuses one of them (REUSE_FROM): one precompiled header per tree instead of one per target.
# Headers that bring macros of their own (spdlog and fmt, Boost) stay out.
#
# The fuzz build (clang, sanitizers) goes without: clang refuses a precompiled header whose
# macros differ from the command line's instead of falling back to the text.
option(TY_PCH "Precompile the standard library, nlohmann/json and GoogleTest headers" ON)

# The optimisation of the tests' own code (tests/CMakeLists.txt) and of their precompiled header.
set(TY_TEST_OPTIMIZE $<$<CONFIG:RelWithDebInfo,Release>:-O1>)

set(TY_PCH_HEADERS
  <algorithm> <array> <atomic> <chrono> <cstdint> <cstdio> <cstdlib> <cstring> <filesystem>
  <fstream> <functional> <map> <memory> <mutex> <optional> <set> <sstream> <string>
  <string_view> <thread> <unordered_map> <utility> <vector> <nlohmann/json.hpp>)

function(ty_precompile_dir dir)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    get_target_property(pic ${t} POSITION_INDEPENDENT_CODE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|EXECUTABLE|OBJECT_LIBRARY)$" OR t MATCHES "^ty_pch" OR pic)
      continue()  # GCC refuses a header precompiled without -fPIC in a -fPIC compile
    endif()
    get_target_property(libs ${t} LINK_LIBRARIES)
    if("GTest::gtest" IN_LIST libs)
      target_precompile_headers(${t} REUSE_FROM ty_pch_test)
    else()
      target_precompile_headers(${t} REUSE_FROM ty_pch)
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    ty_precompile_dir(${sub})
  endforeach()
endfunction()

function(ty_precompile root)
  if(NOT TY_PCH OR TY_FUZZ)
    return()
  endif()
  set(empty ${CMAKE_BINARY_DIR}/ty_pch_empty.cpp)
  file(CONFIGURE OUTPUT ${empty} CONTENT "// The translation unit the shared precompiled headers are built with.\n")
  add_library(ty_pch OBJECT ${empty})
  target_precompile_headers(ty_pch PRIVATE ${TY_PCH_HEADERS})
  add_library(ty_pch_test OBJECT ${empty})
  # With GoogleTest's own compile definitions (GTEST_HAS_PTHREAD=1), which every test that links
  # it is compiled with: GCC refuses a precompiled header built without them.
  target_link_libraries(ty_pch_test PRIVATE GTest::gtest GTest::gmock)
  target_compile_options(ty_pch_test PRIVATE ${TY_TEST_OPTIMIZE})
  target_precompile_headers(ty_pch_test PRIVATE ${TY_PCH_HEADERS} <gtest/gtest.h> <gmock/gmock.h>)
  ty_precompile_dir(${root})
endfunction()
