# shellcheck shell=bash
# tests/vm/prepare.bash: `tests/vm/vm prepare`: fetch Debian's kernel package (apt-get download, nothing
# installed), unpack it, and build the VM's uncompressed kernel and its initramfs (busybox, init, the
# modules below) into the cache; and ensure_prepared, with which run, shell, check and accel prepare
# only when nothing usable is there. Sourced by tests/vm/vm, never run by itself.

# Modules wanted, in load order (their dependencies are added before them from the package's
# modules.dep): rxe needs a crc32 implementation (crc32_generic; without it "failed to add <netdev>")
# and the UDP tunnels; rdma_ucm gives librdmacm its device; 9p over virtio-mmio (microvm has no PCI)
# shares the host's files (virtio_pci: the same on the pc and q35 machines, for tests/vm/smp-soak);
# virtio_net joins two VMs; veth for experiments; sch_netem lets a test drop and delay packets on the
# link (`tc qdisc add dev eth0 root netem loss 5%`); sch_ingress (clsact), cls_u32 and act_gact let it
# drop chosen packets (trace --lose-cm).
modules=(crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe configfs ib_cm iw_cm rdma_cm
    rdma_ucm netfs fscache 9pnet 9p virtio_ring virtio virtio_mmio virtio_pci 9pnet_virtio failover
    net_failover virtio_net virtio_console veth sch_netem sch_ingress cls_u32 act_gact)

# What the built files depend on besides the kernel: a change rebuilds them. (declare -f hashes
# build's code as bash prints it, not its comments or which file it is in.)
build_sum() {
    { declare -f build; printf '%s\n' "${modules[@]}" -- "${siw_modules[@]}"; cat "$here/init"; } | md5sum | cut -c1-12
}

# The kernel series the VM boots: Debian 12's own (linux-image-amd64, 6.1) unless RDMA_SAMPLES_VM_KERNEL
# names another series Debian 12 ships (6.12, from bookworm-security: linux-image-6.12-amd64). Each
# series keeps its own package, build and siw.ko in the cache, so that two kernels alternate freely.
kernel_series() {
    local k=${RDMA_SAMPLES_VM_KERNEL:-}
    case "$k" in
    "" | default) echo "" ;;
    *) [[ $k =~ ^[0-9]+\.[0-9]+$ ]] || usage_error "RDMA_SAMPLES_VM_KERNEL=$k: expected a kernel series such as 6.12"
        echo "$k" ;;
    esac
}
kernel_meta() { local k; k=$(kernel_series); echo "linux-image-${k:+$k-}amd64"; }
# Where the series' kernel package is kept, and the file that names the package its last prepare resolved.
deb_dir() { local k; k=$(kernel_series); echo "$cache/deb${k:+-$k}"; }
package_file() { local k; k=$(kernel_series); echo "$cache/package${k:+-$k}"; }

kernel_package() {
    apt-cache depends "$(kernel_meta)" 2>/dev/null |
        awk '$1 ~ /Depends:$/ && $2 ~ /^linux-image-[0-9]/ {print $2; exit}'
}

# apt_fail LOG: the last meaningful line apt printed, for a one-line error.
apt_fail() { grep -E '^(E|W|Err):' "$1" 2>/dev/null | tail -n 1 | cut -c1-200; }

# build PACKAGE DEST: download and unpack the kernel package, write DEST/{vmlinux,initrd.gz,kernel}.
build() {
    local pkg=$1 dest=$2
    work=$(mktemp -d "$cache/work.XXXXXX")
    # The package is kept in $(deb_dir) (one kernel per series), so that a new version of this harness
    # rebuilds without downloading again.
    local deb debs
    debs=$(deb_dir)
    deb=$(find "$debs" -maxdepth 1 -name "${pkg}_*.deb" 2>/dev/null | head -n 1 || true)
    if [ -z "$deb" ]; then
        say "downloading $pkg (apt-get download; nothing is installed)"
        if ! (cd "$work" && apt-get download "$pkg") >"$work/apt.log" 2>&1; then
            say "download failed; refreshing the package lists (apt-get update)"
            if ! apt-get update -qq >>"$work/apt.log" 2>&1 ||
                ! (cd "$work" && apt-get download "$pkg") >>"$work/apt.log" 2>&1; then
                die "cannot download $pkg (network or apt sources unavailable?): $(apt_fail "$work/apt.log")"
            fi
        fi
        rm -rf "$debs"
        mkdir -p "$debs"
        mv "$work"/*.deb "$debs/"
        deb=$(find "$debs" -maxdepth 1 -name "${pkg}_*.deb" | head -n 1)
    fi
    say "unpacking ${deb##*/}"
    dpkg -x "$deb" "$work/k"
    local kver
    kver=$(ls "$work/k/lib/modules")
    [ -f "$work/k/boot/vmlinuz-$kver" ] || die "no kernel image in $pkg"
    depmod -b "$work/k" "$kver"

    # The kernel, uncompressed: QEMU boots an ELF vmlinux directly, which saves seconds of emulated
    # decompression. The bzImage holds an XZ stream (Debian's 6.1) or a zstd one (its 6.12): cut from
    # the magic (FD 37 7A 58 5A 00, or 28 B5 2F FD), unpack.
    say "uncompressing the kernel $kver"
    local bz=$work/k/boot/vmlinuz-$kver off
    off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$bz" | head -n 1 | cut -d: -f1 || true)
    if [ -n "$off" ]; then
        tail -c +$((off + 1)) "$bz" | xz -dc --single-stream >"$work/vmlinux" 2>/dev/null || true
    else
        off=$(LC_ALL=C grep -obUaP '\x28\xb5\x2f\xfd' "$bz" | head -n 1 | cut -d: -f1 || true)
        [ -n "$off" ] || die "no XZ or zstd stream in $bz"
        # (zstd stops at the end of its frame; what follows in the bzImage is ignored)
        tail -c +$((off + 1)) "$bz" | zstd -dcq 2>/dev/null >"$work/vmlinux" || true
    fi
    [ -s "$work/vmlinux" ] || die "could not unpack the kernel from $bz"

    # The modules and their dependencies, in load order (modprobe --show-depends lists a module's
    # dependencies first).
    # siw_modules (siw.bash) go to siw.order, which init loads only for --provider siw.
    local root=$work/root m f name order
    mkdir -p "$root"/{bin,sbin,proc,sys,dev,modules}
    : >"$root/modules.order"
    : >"$root/siw.order"
    for m in "${modules[@]}" -- "${siw_modules[@]}"; do
        if [ "$m" = -- ]; then
            order=siw.order
            continue
        fi
        if ! modprobe -d "$work/k" -S "$kver" --show-depends "$m" >"$work/deps" 2>&1; then
            # fscache became part of netfs in Linux 6.8: a later kernel has no module of that name.
            [ "$m" != fscache ] || continue
            die "module $m not found in $pkg: $(head -n 1 "$work/deps")"
        fi
        while read -r kind f _; do
            [ "$kind" = insmod ] || continue
            name=$(basename "$f")
            name=${name%%.ko*}
            [ -e "$root/modules/$name.ko" ] && continue
            case "$f" in
            *.ko.xz) xz -dc "$f" >"$root/modules/$name.ko" ;;
            *.ko.zst) zstd -dcq "$f" >"$root/modules/$name.ko" ;;
            *.ko.gz) gzip -dc "$f" >"$root/modules/$name.ko" ;;
            *) cp "$f" "$root/modules/$name.ko" ;;
            esac
            echo "$name" >>"$root/${order:-modules.order}"
        done <"$work/deps"
    done
    say "building the initramfs (busybox, init, $(wc -l <"$root/modules.order") modules)"
    cp "$(command -v busybox)" "$root/bin/busybox"
    for f in sh mount insmod ip poweroff mkdir cat chroot sync echo sleep grep ln mv; do
        ln -s busybox "$root/bin/$f"
    done
    cp "$here/init" "$root/init"
    chmod +x "$root/init"
    (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd.gz"

    mkdir "$work/out"
    mv "$work/vmlinux" "$work/initrd.gz" "$work/out/"
    echo "$kver" >"$work/out/kernel"
    rm -rf "$dest"
    mv "$work/out" "$dest"
    rm -rf "$work"
    work=
}

# One folder per kernel package and per version of this harness ($cache/PACKAGE-SUM), so that checkouts
# of different versions share the cache and boot at the same time; $(package_file) names the kernel
# package that the last prepare of the series resolved.
built() { [ -f "$1/initrd.gz" ] && [ -f "$1/vmlinux" ]; }

cmd_prepare() {
    command -v busybox >/dev/null || die "busybox not found (apt-get install busybox-static)"
    mkdir -p "$cache"
    exec 9>>"$cache/.lock"
    flock 9
    # Left by a build that was killed: whoever built them held this lock.
    rm -rf "$cache"/work.*
    local pkg="" sum d
    sum=$(build_sum)
    if command -v apt-cache >/dev/null; then
        pkg=$(kernel_package)
        if [ -z "$pkg" ] && [ "$(id -u)" = 0 ]; then
            say "apt knows no $(kernel_meta); refreshing the package lists (apt-get update)"
            apt-get update -qq >/dev/null 2>&1 || true
            pkg=$(kernel_package)
        fi
    fi
    if [ -z "$pkg" ]; then
        # No apt answer: keep the newest build of this version, if any.
        for d in "$cache"/linux-image-"$(kernel_series)"*-"$sum"; do
            if built "$d"; then
                say "cannot resolve $(kernel_meta) with apt; keeping ${d##*/}"
                kdir=$d
                exec 9>&-
                return 0
            fi
        done
        die "cannot resolve Debian's $(kernel_meta) (apt-cache depends $(kernel_meta) gave nothing; apt-get update as root, or no Debian apt here)"
    fi
    kdir=$cache/$pkg-$sum
    if ! built "$kdir"; then
        build "$pkg" "$kdir"
        say "ready: $kdir"
    fi
    touch "$kdir/used"
    # Builds no run has used for 30 days (other kernels, older versions of this harness).
    for d in "$cache"/linux-image-*; do
        [ "$d" = "$kdir" ] || [ ! -d "$d" ] || [ -z "$(find "$d" -maxdepth 1 -name used -mtime +30)" ] ||
            rm -rf "$d"
    done
    echo "$pkg" >"$cache/package.$$"
    mv "$cache/package.$$" "$(package_file)"
    exec 9>&-
}

# run, shell and check prepare only when nothing usable is there (asking apt costs a second or two).
ensure_prepared() {
    local pkg
    pkg=$(cat "$(package_file)" 2>/dev/null) || pkg=
    kdir=$cache/$pkg-$(build_sum)
    if [ -z "$pkg" ] || ! built "$kdir"; then cmd_prepare; fi
    touch "$kdir/used" 2>/dev/null || true
}
