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

bool is_link_local(const std::array<std::uint8_t, 16> &g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }

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

const char *port_state_name(ibv_port_state s)
{
    return ibv_port_state_str(s);
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

Device open_device(const Args &args)
{
    Device dev;
    int num = 0;
    DeviceListPtr list(ibv_get_device_list(&num));
    // ENOSYS: the kernel has no RDMA support at all (no ib_uverbs); treat it like an empty list.
    if (!list && errno != ENOSYS)
        fail_errno("ibv_get_device_list", errno);
    if (!list || num == 0)
        throw Error("no RDMA device found (ibv_get_device_list returned none)", no_device_hint());

    std::string names;
    for (int i = 0; i < num; ++i)
        names += (i ? ", " : "") + std::string(ibv_get_device_name(list.get()[i]));

    for (int i = 0; i < num && !dev.ctx; ++i) {
        ibv_device *d = list.get()[i];
        const std::string name = ibv_get_device_name(d);
        if (!args.device.empty() && name != args.device)
            continue;
        ContextPtr ctx(check(ibv_open_device(d), "ibv_open_device(" + name + ")"));
        ibv_port_attr pa{};
        check_rc(ibv_query_port(ctx.get(), dev.port, &pa), "ibv_query_port(" + name + ", port 1)");
        if (pa.state != IBV_PORT_ACTIVE) {
            if (!args.device.empty())
                throw Error("device " + name + " port 1 is " + port_state_name(pa.state) + ", not ACTIVE",
                            "bring up its network interface (ip link set <if> up) and check `rdma link show`");
            continue;  // no -d: try the next device
        }
        dev.ctx = std::move(ctx);
        dev.name = name;
        dev.port_attr = pa;
    }
    if (!dev.ctx) {
        if (!args.device.empty())
            throw Error("no RDMA device named \"" + args.device + "\"", "the devices here are: " + names + "; pass one with -d");
        throw Error("no RDMA device has an active port (devices: " + names + ")",
                    "bring up the network interface of one (ip link set <if> up) and check `rdma link show`");
    }
    check_rc(ibv_query_device(dev.ctx.get(), &dev.device_attr), "ibv_query_device");

    // The GID table: one entry per address and RoCE version. Empty entries (all zero) are skipped.
    const bool is_ib = dev.port_attr.link_layer == IBV_LINK_LAYER_INFINIBAND;
    std::vector<GidEntry> table;
    for (int i = 0; i < dev.port_attr.gid_tbl_len; ++i) {
        ibv_gid_entry e{};
        if (ibv_query_gid_ex(dev.ctx.get(), dev.port, static_cast<std::uint32_t>(i), &e, 0) != 0)
            continue;
        GidEntry g;
        g.index = i;
        std::memcpy(g.raw.data(), e.gid.raw, 16);
        g.type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? GidType::roce_v2
                 : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? GidType::roce_v1
                                                       : GidType::ib;
        table.push_back(g);
    }
    if (args.gid_index) {
        bool found = false;
        for (const auto &g : table)
            found = found || g.index == *args.gid_index;
        if (!found)
            throw Error("GID index " + std::to_string(*args.gid_index) + " is empty or out of range on " + dev.name +
                            " port 1 (table size " + std::to_string(dev.port_attr.gid_tbl_len) + ")",
                        "list the valid GIDs with ibv_devinfo -v -d " + dev.name + " or leave -g out to choose the best");
        dev.gid_index = *args.gid_index;
    } else {
        dev.gid_index = choose_gid_index(table, is_ib);
        if (dev.gid_index < 0)
            throw Error("device " + dev.name + " has no GID on port 1",
                        "give its network interface an IP address (ip addr add ...); Soft-RoCE GIDs follow the addresses");
    }
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

} // namespace rdma_samples
