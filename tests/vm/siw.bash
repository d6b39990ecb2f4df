# shellcheck shell=bash
# tests/vm/siw.bash: Soft-iWARP (siw) for the VM. Debian's kernel is built without CONFIG_RDMA_SIW, so
# there is no siw.ko in its package; ensure_siw builds one out of tree from Debian's own packages for
# exactly the kernel the VM boots (linux-source-X.Y for drivers/infiniband/sw/siw, and the kernel's
# headers and kbuild, all at the kernel package's version; apt-get download and dpkg -x, nothing is
# installed) and caches it beside the kernel. The user-space half (libsiw) is in ibverbs-providers.
# Sourced by tests/vm/vm, never run by itself.

# Modules siw.ko needs from the VM's own module tree, in load order (libcrc32c asks the crypto API for
# "crc32c", which crc32c_generic provides). They are in the initramfs, loaded only for --provider siw.
siw_modules=(crc32c_generic libcrc32c)

# siw_fail REASON: the one line that says what to install, and failure (the rxe path is unaffected).
siw_fail() {
    say "siw: cannot build siw.ko for kernel $siw_kver ($siw_ver): $1; needs gcc-12, make and Debian's" \
        "linux-source-$siw_series, linux-headers-$siw_kver, linux-headers-${siw_kver%-*}-common and" \
        "linux-kbuild-$siw_series at version $siw_ver from apt (apt-get update as root)"
    return 1
}

# siw_build DEST: download and unpack the packages, build siw.ko, strip its debug sections, DEST/siw.ko.
siw_build() {
    local dest=$1 w p
    w=$(mktemp -d "$cache/siw-work.XXXXXX")
    local pkgs=("linux-source-$siw_series=$siw_ver" "linux-headers-$siw_kver=$siw_ver"
        "linux-headers-${siw_kver%-*}-common=$siw_ver" "linux-kbuild-$siw_series=$siw_ver")
    command -v gcc-12 >/dev/null && command -v make >/dev/null || { rm -rf "$w"; siw_fail "no gcc-12 or make"; return 1; }
    say "siw: downloading ${pkgs[*]} (apt-get download; nothing is installed)"
    if ! (cd "$w" && apt-get download "${pkgs[@]}") >"$w/apt.log" 2>&1; then
        if [ "$(id -u)" != 0 ] || ! apt-get update -qq >>"$w/apt.log" 2>&1 ||
            ! (cd "$w" && apt-get download "${pkgs[@]}") >>"$w/apt.log" 2>&1; then
            # apt keeps only the newest revision of a kernel ABI (a cached kernel may be older). Debian
            # bumps the ABI name (the -56 in 6.1.0-56) whenever the kernel's exported symbols change, so
            # the same packages at apt's current revision build a module this kernel loads.
            say "siw: version $siw_ver is not in apt; trying apt's current revision of the same ABI ($siw_kver)"
            rm -f "$w"/*.deb
            if ! (cd "$w" && apt-get download "${pkgs[@]%=*}") >>"$w/apt.log" 2>&1; then
                p=$(apt_fail "$w/apt.log")
                rm -rf "$w"
                siw_fail "apt-get download failed${p:+: $p}"
                return 1
            fi
        fi
    fi
    for p in "$w"/*.deb; do dpkg -x "$p" "$w/root"; done
    # The headers' Makefile includes the common headers by their installed path: point it at the copy.
    local hdr=$w/root/usr/src/linux-headers-$siw_kver
    echo "include $w/root/usr/src/linux-headers-${siw_kver%-*}-common/Makefile" >"$hdr/Makefile"
    # (no BTF type information for the module: it needs pahole, and nothing here reads it; 6.12's
    # kbuild would fail without it)
    say "siw: building siw.ko against $siw_kver"
    mkdir "$w/siw"
    if ! tar -xJf "$w/root/usr/src/linux-source-$siw_series.tar.xz" -C "$w/siw" --strip-components=5 \
        "linux-source-$siw_series/drivers/infiniband/sw/siw" >>"$w/build.log" 2>&1 ||
        ! make -C "$hdr" M="$w/siw" CONFIG_RDMA_SIW=m CONFIG_DEBUG_INFO_BTF_MODULES= modules >>"$w/build.log" 2>&1; then
        p=$(grep -E 'error|Error' "$w/build.log" | head -n 1 | cut -c1-160)
        rm -rf "$w"
        siw_fail "the build failed${p:+: $p}"
        return 1
    fi
    strip --strip-debug "$w/siw/siw.ko"
    mkdir -p "$dest"
    mv "$w/siw/siw.ko" "$dest/siw.ko.tmp"
    mv "$dest/siw.ko.tmp" "$dest/siw.ko"
    rm -rf "$w"
}

# ensure_siw: siw_ko= the cached siw.ko for the kernel in $kdir (built on first use, and again when the
# kernel changes: one folder per kernel release and package version), or a one-line failure.
ensure_siw() {
    siw_kver=$(cat "$kdir/kernel")
    siw_series=$(echo "$siw_kver" | cut -d. -f1,2)
    siw_ver=
    local deb
    deb=$(find "$(deb_dir)" -maxdepth 1 -name "linux-image-${siw_kver}_*.deb" 2>/dev/null | head -n 1)
    [ -z "$deb" ] || siw_ver=$(dpkg-deb -f "$deb" Version 2>/dev/null) || siw_ver=
    if [ -z "$siw_ver" ]; then
        siw_ver=unknown
        siw_fail "the kernel package's version is unknown (no linux-image-$siw_kver package in $(deb_dir))"
        return 1
    fi
    local dest=$cache/siw-$siw_kver-$siw_ver
    siw_ko=$dest/siw.ko
    [ -f "$siw_ko" ] && return 0
    exec 8>>"$cache/.siw.lock"
    flock 8
    rm -rf "$cache"/siw-work.*
    if [ ! -f "$siw_ko" ]; then
        siw_build "$dest" || { exec 8>&-; return 1; }
        say "siw: ready: $siw_ko"
        # The modules of other releases of this series (or package versions) are never booted again: one
        # siw-* stays per series.
        find "$cache" -maxdepth 1 -name "siw-$siw_series.*" ! -name "siw-$siw_kver-$siw_ver" -exec rm -rf {} +
    fi
    exec 8>&-
}
