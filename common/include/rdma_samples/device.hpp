/**
 * @file device.hpp
 * @brief Open an RDMA device and choose the GID that addresses this side.
 *
 * On RoCE (Ethernet, which includes Soft-RoCE) a port has a table of GIDs, one per IP address and
 * RoCE version. The right one for a sample is a RoCE v2 GID built from an IPv4 address
 * (::ffff:a.b.c.d); a link-local fe80:: GID works only when both sides share a link and has no route
 * on a loopback device. choose_gid_index() makes that choice; `-g` overrides it.
 */
#pragma once

#include <rdma_samples/verbs.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rdma_samples {

/** @brief The kind of GID: InfiniBand, RoCE v1 (Ethernet frame) or RoCE v2 (UDP/IP). */
enum class GidType { ib, roce_v1, roce_v2 };

/** @brief One entry of a port's GID table, as choose_gid_index() sees it. */
struct GidEntry {
    int index = 0;                      ///< position in the table (what -g takes)
    std::array<std::uint8_t, 16> raw{}; ///< the 128-bit GID
    GidType type = GidType::roce_v2;    ///< how packets addressed with it are framed
};

/**
 * @brief Pick the best GID of a port: RoCE v2 with an IPv4-mapped address, then any other RoCE v2 GID
 * that is not link-local, then any non-link-local GID, then whatever is left.
 * @param table  the valid (non-zero) entries of the port's GID table
 * @param is_ib  true on an InfiniBand port, where GID 0 is always right
 * @return the chosen index, or -1 when @p table is empty
 */
int choose_gid_index(const std::vector<GidEntry> &table, bool is_ib);

/**
 * @brief The GID as text: "::ffff:10.77.0.1" for IPv4-mapped, IPv6 notation otherwise.
 * @param gid the GID
 * @return its text form
 */
std::string gid_to_string(const ibv_gid &gid);

/**
 * @brief Parse the text form back.
 * @param text the text, e.g. "::ffff:10.77.0.1"
 * @param[out] gid the GID, when the text is valid
 * @return false when @p text is no IPv6 address
 */
bool gid_from_string(const std::string &text, ibv_gid &gid);

/** @brief An open device, its port, and the GID this side is addressed by. */
struct Device {
    ContextPtr ctx;                ///< the open device context
    std::string name;              ///< e.g. "rxe0"
    std::uint8_t port = 1;         ///< the port used (samples use port 1)
    ibv_port_attr port_attr{};     ///< state, active MTU, LID, link layer
    ibv_device_attr device_attr{}; ///< limits (max_qp_rd_atom, atomic_cap...)
    int gid_index = 0;             ///< chosen or given (-g)
    ibv_gid gid{};                 ///< the GID at gid_index
};

/**
 * @brief One entry of a port's GID table, from what ibv_query_gid_ex() filled in.
 * @param index the entry's position in the table
 * @param entry what ibv_query_gid_ex() returned for it
 * @return the entry, as choose_gid_index() ranks it
 */
GidEntry to_gid_entry(int index, const ibv_gid_entry &entry);

/**
 * @brief Stop with an explained error when ibv_get_device_list() found no device: how to create a
 * Soft-RoCE one, or to run in the project's VM.
 * @param list what ibv_get_device_list() returned (may be null)
 * @param num  the count it set
 * @throws Error when there is no device
 */
void require_devices(ibv_device **list, int num);

/**
 * @brief Whether to try @p dev's port: fine when it is ACTIVE; an explained error when the device was
 * named (`-d`) and its port is not; false (try the next device) when it was not named.
 * @param dev   the device just opened, its port queried
 * @param named true when `-d` named this device
 * @return true when the port is active
 */
bool port_is_usable(const Device &dev, bool named);

/**
 * @brief Stop when no device could be used: the name given with `-d` exists nowhere, or no device
 * has an active port. The error lists the devices that exist.
 * @param list,num what ibv_get_device_list() returned
 * @param name     what `-d` asked for, or empty
 * @throws Error always
 */
[[noreturn]] void fail_no_usable_device(ibv_device **list, int num, const std::string &name);

/**
 * @brief The GID index to use: @p wanted (`-g`) when it names a valid entry, else the best one by
 * choose_gid_index()'s ranking.
 * @param table   the port's valid GID entries
 * @param wanted  the index given with `-g`, or none
 * @param dev     the device (its name and port attributes, for messages and the link layer)
 * @return the index
 * @throws Error when @p wanted is empty or out of range, or the port has no GID at all
 */
int pick_gid_index(const std::vector<GidEntry> &table, std::optional<int> wanted, const Device &dev);

/**
 * @brief Open the device named @p name, or the first one with an active port, and choose the GID.
 *
 * rdma_write/requester.cpp writes these calls out (ibv_get_device_list(), ibv_open_device(),
 * ibv_query_device(), ibv_query_port(), ibv_query_gid_ex(), ibv_query_gid()); every later lesson calls
 * this. Errors explain themselves: no device at all (with how to create a Soft-RoCE one), an unknown
 * name (with the names that exist), a port that is not active, a GID index out of range or empty.
 * @param name      the device (`-d`), or empty for the first one with an active port
 * @param gid_index the GID index (`-g`), or none for the best GID
 * @return the open device, its port and chosen GID
 */
Device open_device(const std::string &name, std::optional<int> gid_index);

/**
 * @brief Check that the device executes atomics, and say how far their atomicity reaches.
 *
 * The device that matters is the responder's: it performs the read-modify-write on its own memory.
 * `atomic_cap` (ibv_query_device(3)) tells the scope: IBV_ATOMIC_NONE (no atomics),
 * IBV_ATOMIC_HCA (atomic only against other atomics that go through this same device: not against
 * the CPU's own stores, nor against plain RDMA WRITEs to the same word), IBV_ATOMIC_GLOB (atomic
 * against every other access, CPU included). Soft-RoCE reports IBV_ATOMIC_HCA; ConnectX (mlx5) does
 * only when its 8-byte atomic endianness mode fits verbs (else IBV_ATOMIC_NONE: mlx5 get_atomic_caps()).
 * Prints one line with the capability.
 * @param dev the open device
 * @throws Error if the device has no atomics
 */
void require_atomics(const Device &dev);

/**
 * @brief Whether @p dev speaks iWARP (Soft-iWARP's siw, Intel E810, Chelsio): its device's
 * transport_type is IBV_TRANSPORT_IWARP (ibv_get_device_list(3)), where RoCE and InfiniBand devices say
 * IBV_TRANSPORT_IB. iWARP carries RDMA over TCP (MPA, DDP, RDMAP): reliable connections only, set up
 * by the connection manager, with no UD, no immediate data in RDMAP, and (on siw) no atomics.
 * @param dev the open device
 * @return true on iWARP
 */
bool is_iwarp(const Device &dev);

/**
 * @brief Whether @p dev is Soft-iWARP, the kernel's software iWARP (siw): an iWARP device whose
 * vendor_id is siw's (0x626d74, SIW_VENDOR_ID in drivers/infiniband/sw/siw/siw.h).
 * @param dev the open device
 * @return true on siw
 */
bool is_siw(const Device &dev);

/**
 * @brief Stop at once when an iWARP device is asked to connect with descriptor files. An iWARP QP
 * reaches RTS only through the kernel's iWARP CM, which moves it there itself once its TCP connection
 * and MPA handshake are up: there is no QPN/PSN to copy and no RTR/RTS to set by hand.
 * @param dev    the open device
 * @param use_cm true with `-cm` (then nothing is checked)
 * @param hint   what to do instead (default: add -cm on both sides)
 * @throws Error naming the device and its transport
 */
void require_rdma_cm_on_iwarp(const Device &dev, bool use_cm, const std::string &hint = {});

/**
 * @brief Stop at once when the device has no immediate data (RDMA WRITE with immediate, SEND with
 * immediate). iWARP's RDMAP defines none and Soft-iWARP (siw) implements none; Chelsio's iw_cxgb4 adds
 * RDMA WRITE with immediate as an extension, untested here: every iWARP device is refused, and the line
 * says which of the two it is.
 * @param dev the open device
 * @throws Error naming the device and its transport
 */
void require_immediate_data(const Device &dev);

/**
 * @brief Stop at once when the device has no unreliable datagram (UD) QPs: iWARP runs over TCP and is
 * connected only (ibv_create_qp(IBV_QPT_UD) would fail with EOPNOTSUPP).
 * @param dev the open device
 * @throws Error naming the device and its transport
 */
void require_ud(const Device &dev);

/**
 * @brief The enum name of an atomic capability, e.g. "IBV_ATOMIC_HCA".
 * @param cap the capability
 * @return its name
 */
const char *atomic_cap_name(ibv_atomic_cap cap);

} // namespace rdma_samples
