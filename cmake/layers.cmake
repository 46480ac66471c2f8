# The pipeline's direction, checked: which folder's code may use which (README "Layout",
# docs/architecture.md). Data flows one way, job -> space -> variants -> pruner -> compile ->
# measure -> db, and the application shell sits on top:
#
#   app -> {tuner, web, select};  tuner -> {pruner, db, cuda};  web -> {db, select};
#   select -> {db, cuda};  cuda -> variants;  pruner -> variants;  db -> variants
#
# Used twice: at configure time on the targets' link libraries (gputune_check_target_layers, a
# link against the direction stops the configure), and by the test `Layers.IncludesFollowThePipeline`
# on every #include of every source file (cmake/check_includes.cmake).

# Folders each folder may use (besides itself). tests/ and bench/ may use every folder.
set(GPUTUNE_LAYER_variants "")
set(GPUTUNE_LAYER_pruner variants)
set(GPUTUNE_LAYER_db variants)
set(GPUTUNE_LAYER_cuda variants)
set(GPUTUNE_LAYER_select cuda db variants)
set(GPUTUNE_LAYER_web select db variants)
set(GPUTUNE_LAYER_tuner cuda pruner db variants)
set(GPUTUNE_LAYER_app tuner web select cuda pruner db variants)
set(GPUTUNE_LAYERS variants pruner db cuda select web tuner app)
# Rooms inside tuner/, in order: code of a room may use the rooms before it, never one after it
# (checked on the includes, like the folders). common: the process's plumbing (command line,
# progress, signals, exit codes, the job as tuned); measure: the device, the kernel's arguments,
# launching and timing; search: the strategies and their scoring; emulator: the CPU emulator and
# `check`; compile: configurations to compiled, inspected candidates; model: predictions and rule
# 4 before compiling; run: the stages of `gputune run`; tools: the other commands (prune, replay,
# generate).
set(GPUTUNE_ROOMS_tuner common measure search emulator compile model run tools)
# Headers only their own folder may include: SQL stays in db/ (db/sqlite.h is its RAII layer);
# the HTTP server's state and plumbing stay in web/ (web/server_impl.h).
set(GPUTUNE_PRIVATE_HEADERS db/sqlite.h web/server_impl.h)

# True in OUT when code of folder FROM may use folder TO.
function(gputune_layer_allows FROM TO OUT)
  if(FROM STREQUAL TO OR "${TO}" IN_LIST GPUTUNE_LAYER_${FROM})
    set(${OUT} TRUE PARENT_SCOPE)
  else()
    set(${OUT} FALSE PARENT_SCOPE)
  endif()
endfunction()

# True in OUT when code of room FROM of FOLDER may use room TO of the same folder.
function(gputune_room_allows FOLDER FROM TO OUT)
  list(FIND GPUTUNE_ROOMS_${FOLDER} ${FROM} from_index)
  list(FIND GPUTUNE_ROOMS_${FOLDER} ${TO} to_index)
  if(from_index LESS 0 OR to_index LESS 0 OR to_index LESS_EQUAL from_index)
    set(${OUT} TRUE PARENT_SCOPE)
  else()
    set(${OUT} FALSE PARENT_SCOPE)
  endif()
endfunction()

# The library targets given: each belongs to the folder of its CMakeLists (its SOURCE_DIR's first
# part below the project), and may link the libraries of the folders that folder may use.
function(gputune_check_target_layers)
  set(errors "")
  foreach(t IN LISTS ARGN)
    if(NOT TARGET ${t})
      list(APPEND errors "target ${t} is gone: update the list in cmake/layers.cmake")
      continue()
    endif()
    get_target_property(dir ${t} SOURCE_DIR)
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${dir})
    string(REGEX REPLACE "/.*" "" from "${rel}")
    get_target_property(links ${t} LINK_LIBRARIES)
    foreach(l IN LISTS links)
      if(NOT l MATCHES "^gputune_" OR NOT TARGET ${l})
        continue()
      endif()
      get_target_property(ldir ${l} SOURCE_DIR)
      file(RELATIVE_PATH lrel ${PROJECT_SOURCE_DIR} ${ldir})
      string(REGEX REPLACE "/.*" "" to "${lrel}")
      gputune_layer_allows(${from} ${to} ok)
      if(NOT ok)
        list(APPEND errors "${t} (${from}/) links ${l} (${to}/), against the pipeline's direction")
      endif()
    endforeach()
  endforeach()
  if(errors)
    list(JOIN errors "\n  " text)
    message(FATAL_ERROR "cmake/layers.cmake:\n  ${text}\n"
                        "Fix: move the code to the folder that may use it, or (if the design changed) "
                        "the table in cmake/layers.cmake and docs/architecture.md together.")
  endif()
endfunction()
