# cmake -DIN=file -DOUT=file.cpp -DSYMBOL=name -P embed_text.cmake
# Writes OUT, a .cpp that defines `extern const char SYMBOL[]` (namespace gputune::embedded): the
# bytes of IN, NUL-terminated. A real source file (a header a tool can read, compile and lint)
# becomes a string in the binary, as web/assets become the dashboard's files.
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
get_filename_component(name "${IN}" NAME)
file(WRITE "${OUT}.tmp"
  "// Generated from ${name} by cmake/embed_text.cmake. Do not edit.\n"
  "namespace gputune::embedded {\nextern const char ${SYMBOL}[];\nconst char ${SYMBOL}[] = {${bytes} 0};\n}\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
