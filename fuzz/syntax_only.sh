#!/bin/sh
# Compiler launcher of ty_lockcheck (fuzz/CMakeLists.txt): runs the compile command it is given
# with -fsyntax-only, so that clang's front end (and its thread-safety analysis) runs without code
# generation, then leaves an empty file where the object would be, so that the build tool sees
# the step done and reruns it only when a source or header changes. The precompiled header's own
# compile (-emit-pch) runs as given: the syntax-only compiles read it.
case " $* " in *" -emit-pch "*) exec "$@" ;; esac
out=
prev=
for arg in "$@"; do
  [ "$prev" = "-o" ] && out=$arg
  prev=$arg
done
"$@" -fsyntax-only || exit
[ -n "$out" ] && : > "$out"
