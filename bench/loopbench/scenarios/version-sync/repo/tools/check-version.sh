#!/bin/sh
v=$(cat VERSION); m=$(sed -n 's/^version=//p' pkg/meta.txt)
[ "$v" = "$m" ] || { echo "VERSION says $v, pkg/meta.txt says $m"; exit 1; }
