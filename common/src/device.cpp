/** @file device.cpp @brief Opening a device, ranking its GIDs. */
#include <rdma_samples/check.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>

#include <arpa/inet.h>

#include <cstring>

namespace rdma_samples {

namespace {

bool is_ipv4_mapped(const std::array<std::uint8_t, 16> &g)
{
    for (int i = 0; i < 10; ++i)
        if (g[static_cast<std::size_t>(i)] != 0)
            return false;
    return g[10] == 0xff && g[11] == 0xff;
}

bool is_link_local(const std::array<std::uint8_t, 16> &g)
{
    return g[0] == 0xfe && (g[1] & 0xc0) == 0x80;
}

/** Higher is better. */
int gid_rank(const GidEntry &e)
{
    if (e.type == GidType::roce_v2 && is_ipv4_mapped(e.raw))
        return 4;
    if (e.type == GidType::roce_v2 && !is_link_local(e.raw))
        return 3;
    if (!is_link_local(e.raw))
        return 2;
    return 1;
}

std::string no_device_hint()
{
    return "this machine has no RDMA device. Create a Soft-RoCE one (as root): modprobe rdma_rxe && rdma link add "
           "rxe0 type rxe netdev <interface>, or run the samples inside the project's VM: ./lab vm";
}

} // namespace

int choose_gid_index(const std::vector<GidEntry> &table, bool is_ib)
{
    if (table.empty())
        return -1;
    if (is_ib) {
        for (const auto &e : table)
            if (e.index == 0)
                return 0;
    }
    const GidEntry *best = nullptr;
    for (const auto &e : table)
        if (best == nullptr || gid_rank(e) > gid_rank(*best))
            best = &e;
    return best->index;
}

std::string gid_to_string(const ibv_gid &gid)
{
    char buf[INET6_ADDRSTRLEN];
    if (::inet_ntop(AF_INET6, gid.raw, buf, sizeof buf) == nullptr)
        return "::";
    return buf;
}

bool gid_from_string(const std::string &text, ibv_gid &gid)
{
    // inet_pton reads up to the first NUL: "::1\0junk" must not pass for ::1.
    return text.find('\0') == std::string::npos && ::inet_pton(AF_INET6, text.c_str(), gid.raw) == 1;
}

GidEntry to_gid_entry(int index, const ibv_gid_entry &entry)
{
    GidEntry g;
    g.index = index;
    std::memcpy(g.raw.data(), entry.gid.raw, 16);
    switch (entry.gid_type) {
    case IBV_GID_TYPE_ROCE_V2: g.type = GidType::roce_v2; break;
    case IBV_GID_TYPE_ROCE_V1: g.type = GidType::roce_v1; break;
    default: g.type = GidType::ib; break;
    }
    return g;
}

void require_devices(ibv_device **list, int num)
{
    // ENOSYS: the kernel has no RDMA support at all (no ib_uverbs); treat it like an empty list.
    if (list == nullptr && errno != ENOSYS)
        fail_errno("ibv_get_device_list", errno);
    if (list == nullptr || num == 0)
        throw Error("no RDMA device found (ibv_get_device_list returned none)", no_device_hint());
}

bool port_is_usable(const Device &dev, bool named)
{
    if (dev.port_attr.state == IBV_PORT_ACTIVE)
        return true;
    if (named)
        throw Error("device " + dev.name + " port " + std::to_string(dev.port) + " is " +
                        ibv_port_state_str(dev.port_attr.state) + ", not ACTIVE",
                    "bring up its network interface (ip link set <if> up) and check `rdma link show`");
    return false;
}

void fail_no_usable_device(ibv_device **list, int num, const std::string &name)
{
    std::string names;
    for (int i = 0; i < num; ++i) {
        if (i > 0)
            names += ", ";
        names += ibv_get_device_name(list[i]);
    }
    if (!name.empty())
        throw Error("no RDMA device named \"" + name + "\"", "the devices here are: " + names + "; pass one with -d");
    throw Error("no RDMA device has an active port (devices: " + names + ")",
                "bring up the network interface of one (ip link set <if> up) and check `rdma link show`");
}

int pick_gid_index(const std::vector<GidEntry> &table, std::optional<int> wanted, const Device &dev)
{
    if (wanted) {
        for (const auto &g : table)
            if (g.index == *wanted)
                return *wanted;
        throw Error("GID index " + std::to_string(*wanted) + " is empty or out of range on " + dev.name + " port " +
                        std::to_string(dev.port) + " (table size " + std::to_string(dev.port_attr.gid_tbl_len) + ")",
                    "list the valid GIDs with ibv_devinfo -v -d " + dev.name + " or leave -g out to choose the best");
    }
    const int best = choose_gid_index(table, dev.port_attr.link_layer == IBV_LINK_LAYER_INFINIBAND);
    if (best < 0)
        throw Error("device " + dev.name + " has no GID on port " + std::to_string(dev.port),
                    "give its network interface an IP address (ip addr add ...); Soft-RoCE GIDs follow the addresses");
    return best;
}

// The same calls as rdma_write/requester.cpp's step 1, which explains each.
Device open_device(const std::string &name, std::optional<int> gid_index)
{
    int num_devices = 0;
    DeviceListPtr devices(ibv_get_device_list(&num_devices));
    require_devices(devices.get(), num_devices);
    Device dev;
    for (int i = 0; i < num_devices && !dev.ctx; ++i) {
        dev.name = ibv_get_device_name(devices.get()[i]);
        if (!name.empty() && dev.name != name)
            continue;
        dev.ctx.reset(check(ibv_open_device(devices.get()[i]), "ibv_open_device(" + dev.name + ")"));
        check_rc(ibv_query_port(dev.ctx.get(), dev.port, &dev.port_attr), "ibv_query_port(" + dev.name + ", port 1)");
        if (!port_is_usable(dev, !name.empty()))
            dev.ctx.reset();
    }
    if (!dev.ctx)
        fail_no_usable_device(devices.get(), num_devices, name);
    check_rc(ibv_query_device(dev.ctx.get(), &dev.device_attr), "ibv_query_device");
    std::vector<GidEntry> table;
    for (int i = 0; i < dev.port_attr.gid_tbl_len; ++i) {
        ibv_gid_entry entry{};
        if (ibv_query_gid_ex(dev.ctx.get(), dev.port, static_cast<std::uint32_t>(i), &entry, 0) == 0)
            table.push_back(to_gid_entry(i, entry));
    }
    dev.gid_index = pick_gid_index(table, gid_index, dev);
    check_rc(ibv_query_gid(dev.ctx.get(), dev.port, dev.gid_index, &dev.gid), "ibv_query_gid");
    return dev;
}

const char *atomic_cap_name(ibv_atomic_cap cap)
{
    switch (cap) {
    case IBV_ATOMIC_NONE: return "IBV_ATOMIC_NONE";
    case IBV_ATOMIC_HCA: return "IBV_ATOMIC_HCA";
    case IBV_ATOMIC_GLOB: return "IBV_ATOMIC_GLOB";
    }
    return "IBV_ATOMIC_(unknown)";
}

void require_atomics(const Device &dev)
{
    const ibv_atomic_cap cap = dev.device_attr.atomic_cap;
    if (cap == IBV_ATOMIC_NONE)
        throw Error("device " + dev.name + " does not support atomic operations (atomic_cap is IBV_ATOMIC_NONE)",
                    "use a device whose ibv_devinfo -v shows atomic_cap ATOMIC_HCA or ATOMIC_GLOB, on both sides");
    info("atomic_cap %s: %s", atomic_cap_name(cap),
         cap == IBV_ATOMIC_GLOB ? "atomic against every other access to the word, the CPU's included"
                                : "atomic against other atomics through this device, not against CPU stores or WRITEs");
}

bool is_iwarp(const Device &dev)
{
    return dev.ctx->device->transport_type == IBV_TRANSPORT_IWARP;
}

void require_rdma_cm_on_iwarp(const Device &dev, bool use_cm, const std::string &hint)
{
    if (use_cm || !is_iwarp(dev))
        return;
    throw Error(dev.name + " is an iWARP device (transport_type IBV_TRANSPORT_IWARP): iWARP connects only through "
                           "RDMA CM, not with descriptor files",
                hint.empty() ? "add -cm on both sides (and -sa with the responder's IP address on the requester)"
                             : hint);
}

bool is_siw(const Device &dev)
{
    return is_iwarp(dev) && dev.device_attr.vendor_id == 0x626d74; // SIW_VENDOR_ID in drivers/infiniband/sw/siw
}

void require_immediate_data(const Device &dev)
{
    if (!is_iwarp(dev))
        return;
    // RDMAP (RFC 5040) carries no immediate data. Soft-iWARP implements none; Chelsio's iw_cxgb4 adds
    // RDMA WRITE with immediate as its own extension (rdma-core providers/cxgb4), but no SEND with
    // immediate, and the pairs that use immediates are tested on RoCE only: refused on every iWARP device.
    if (is_siw(dev))
        throw Error(dev.name +
                        " is a Soft-iWARP device (siw, transport_type IBV_TRANSPORT_IWARP): siw has no immediate "
                        "data (no RDMA WRITE or SEND with immediate; iWARP's RDMAP defines none)",
                    "run this pair on RoCE or InfiniBand; on iWARP a SEND after the WRITE says what the immediate "
                    "would (rdma_write's goodbye)");
    throw Error(dev.name +
                    " is an iWARP device (transport_type IBV_TRANSPORT_IWARP): iWARP's RDMAP defines no immediate "
                    "data, and this pair's WRITE or SEND with immediate is not run on iWARP here",
                "run this pair on RoCE or InfiniBand; on iWARP a SEND after the WRITE says what the immediate would "
                "(rdma_write's goodbye)");
}

void require_ud(const Device &dev)
{
    if (is_iwarp(dev))
        throw Error(dev.name + " is an iWARP device (transport_type IBV_TRANSPORT_IWARP): iWARP has no unreliable "
                               "datagram (UD) queue pairs",
                    "run this pair on RoCE or InfiniBand; iWARP is connected only (RC over TCP)");
}

} // namespace rdma_samples
