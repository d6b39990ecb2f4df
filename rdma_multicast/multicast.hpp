/**
 * @file multicast.hpp
 * @brief What rdma_multicast's sender and receiver share: joining a group through RDMA CM, attaching a
 * QP to it, and leaving it. The receiver joins as a full member (its kernel reports the group to the network with IGMP), the
 * sender as a send-only full member (no report: it only sends). The join's answer is how to address the
 * group: an address vector whose destination GID is the group's (the MGID), the group's QPN 0xFFFFFF
 * and the port space's Q_Key.
 */
#pragma once

#include "support/options.hpp"

#include <rdma_samples/check.hpp>
#include <rdma_samples/cm.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/text.hpp>

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

namespace rdma_multicast {

using namespace rdma_samples;

/** @brief A membership that leaves the group when it goes: librdmacm frees what a join allocated only in
 *  rdma_leave_multicast(), so a cm_id destroyed while still joined (an error on the way) would leak it. */
class Membership {
public:
    Membership() = default;
    /** @param id the cm_id that joined @param group the group's address */
    Membership(rdma_cm_id *id, const sockaddr_in &group) : id_(id), group_(group) {}
    Membership(Membership &&other) noexcept : id_(std::exchange(other.id_, nullptr)), group_(other.group_) {}
    /** @param other the membership taken over @return this */
    Membership &operator=(Membership &&other) noexcept
    {
        std::swap(id_, other.id_);
        std::swap(group_, other.group_);
        return *this;
    }
    ~Membership()
    {
        if (id_ != nullptr)
            rdma_leave_multicast(id_, reinterpret_cast<sockaddr *>(&group_));
    }
    /** @brief Leave now, checked (the normal end). */
    void leave()
    {
        check_rc(rdma_leave_multicast(std::exchange(id_, nullptr), reinterpret_cast<sockaddr *>(&group_)),
                 "rdma_leave_multicast");
    }

private:
    rdma_cm_id *id_ = nullptr;
    sockaddr_in group_{};
};

/** @brief A group joined: the cm_id that joined it, and how to address it (the join event's ud). */
struct Group {
    EventChannelPtr channel;  ///< the cm_id's event channel
    CmIdPtr id;               ///< the cm_id on RDMA_PS_UDP that joined
    Membership membership;    ///< (after id: it leaves before the id is destroyed)
    sockaddr_in addr{};       ///< the group's IPv4 address (--group)
    ibv_ah_attr ah_attr{};    ///< the address vector of the group: grh.dgid is the MGID
    std::uint32_t qp_num = 0; ///< the group's "QPN": 0xFFFFFF, the multicast QPN of the IBTA
    std::uint32_t qkey = 0;   ///< the Q_Key every member's QP takes and every SEND carries
};

/**
 * @brief Our device's IPv4 address: the one its GID maps (::ffff:a.b.c.d, RoCE v2 over IPv4). The
 * cm_id is bound to it, so that RDMA CM joins through the device we opened.
 * @throws Error when the GID maps no IPv4 address (InfiniBand, RoCE v1, an IPv6 GID: choose -g)
 */
inline sockaddr_in device_address(const Device &dev)
{
    static const std::uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(dev.gid.raw, v4_mapped, sizeof v4_mapped) != 0)
        throw Error("GID index " + std::to_string(dev.gid_index) + " of " + dev.name + " (" + gid_to_string(dev.gid) +
                        ") maps no IPv4 address",
                    "this lesson joins IPv4 groups over RoCE v2: pass -g with a ::ffff:a.b.c.d GID (ibv_devinfo -v)");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    std::memcpy(&a.sin_addr, dev.gid.raw + 12, 4);
    return a;
}

/**
 * @brief Join --group through RDMA CM: bind to our device's address, resolve the group's (which device
 * and port reach it), join, and take the answer from RDMA_CM_EVENT_MULTICAST_JOIN.
 * @param dev       the device we opened (the join must go through it)
 * @param group     --group
 * @param send_only true: a send-only full member (the sender), false: a full member (a receiver)
 * @param timeout_s -t, for each answer
 * @return the group joined
 */
inline Group join_group(const Device &dev, const std::string &group, bool send_only, int timeout_s)
{
    Group g;
    g.channel = create_event_channel();
    rdma_cm_id *id = nullptr;
    check_rc(rdma_create_id(g.channel.get(), &id, nullptr, RDMA_PS_UDP), "rdma_create_id(RDMA_PS_UDP)");
    g.id.reset(id);
    g.addr.sin_family = AF_INET;
    inet_pton(AF_INET, group.c_str(), &g.addr.sin_addr); // (--group checked it)
    sockaddr_in local = device_address(dev);
    const std::string where = "group " + group;
    //! [join]
    // Address: bind to our device's IP, then resolve the group's. For a multicast address there is no
    // ARP: the group's MAC is computed (01:00:5e and its low 23 bits) and the MGID is ::ffff:<group>.
    check_rc(rdma_bind_addr(id, reinterpret_cast<sockaddr *>(&local)),
             "rdma_bind_addr(" + addr_to_string(reinterpret_cast<sockaddr *>(&local)) + ")");
    check_rc(rdma_resolve_addr(id, reinterpret_cast<sockaddr *>(&local), reinterpret_cast<sockaddr *>(&g.addr), 2000),
             "rdma_resolve_addr(" + group + ")");
    expect_cm_event(g.channel.get(), RDMA_CM_EVENT_ADDR_RESOLVED, timeout_s, "the group's address", where);
    check_cm_device(id, dev);
    // Join. A full member's kernel sends an IGMP report, so that switches forward the group to it; a
    // send-only full member needs no report: nothing is forwarded to it.
    rdma_cm_join_mc_attr_ex attr{};
    attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
    attr.join_flags = send_only ? RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER : RDMA_MC_JOIN_FLAG_FULLMEMBER;
    attr.addr = reinterpret_cast<sockaddr *>(&g.addr);
    check_rc(rdma_join_multicast_ex(id, &attr, nullptr), "rdma_join_multicast_ex(" + group + ")");
    g.membership = Membership(id, g.addr);
    CmEventPtr joined = expect_cm_event(g.channel.get(), RDMA_CM_EVENT_MULTICAST_JOIN, timeout_s, "the join", where);
    // The answer: how to address the group, as a UD lookup answers with a QP's address (chapter 12).
    g.ah_attr = joined->param.ud.ah_attr;
    g.qp_num = joined->param.ud.qp_num; // 0xFFFFFF: "every QP attached to the MGID"
    g.qkey = joined->param.ud.qkey;
    //! [join]
    info("joined %s as a %s: MGID %s, QPN 0x%06x, Q_Key 0x%08x", group.c_str(),
         send_only ? "send-only full member" : "full member", gid_to_string(g.ah_attr.grh.dgid).c_str(), g.qp_num,
         g.qkey);
    return g;
}

/** @brief A QP attached to a group, detached when this goes: a QP still attached cannot be destroyed (the
 *  kernel refuses ibv_destroy_qp() with EBUSY until its attachments are gone). */
class Attachment {
public:
    /** @brief Attach. @param qp the QP @param group the join's address vector (its MGID and MLID) */
    Attachment(ibv_qp *qp, const ibv_ah_attr &group) : qp_(qp), mgid_(group.grh.dgid), mlid_(group.dlid)
    {
        //! [attach]
        // The MGID from the join, and on InfiniBand the group's LID (0 on RoCE): from now on our device
        // puts a copy of every datagram to the group on this QP's receive queue.
        check_rc(ibv_attach_mcast(qp_, &mgid_, mlid_), "ibv_attach_mcast(" + gid_to_string(mgid_) + ")");
        //! [attach]
    }
    ~Attachment() { ibv_detach_mcast(qp_, &mgid_, mlid_); }
    Attachment(const Attachment &) = delete;
    Attachment &operator=(const Attachment &) = delete;

private:
    ibv_qp *qp_;
    ibv_gid mgid_;
    std::uint16_t mlid_;
};

/**
 * @brief Post @p count receives, one per slot of @p slot bytes from @p base (chapter 12 writes one out:
 * rdma_ud/receiver.cpp), wr_id @p first_wr_id + i for slot i.
 * @param qp the UD QP @param base the first slot @param slot a slot's size (40 + the MTU)
 * @param count how many @param lkey the slots' region @param first_wr_id slot 0's wr_id
 * @param what the call, for its error
 */
inline void post_slot_receives(ibv_qp *qp, char *base, std::size_t slot, int count, std::uint32_t lkey,
                               std::uint64_t first_wr_id, const char *what)
{
    for (int i = 0; i < count; ++i) {
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(base + slot * static_cast<std::size_t>(i)),
                    static_cast<std::uint32_t>(slot), lkey};
        ibv_recv_wr wr{};
        wr.wr_id = first_wr_id + static_cast<std::uint64_t>(i);
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr *bad_wr = nullptr;
        check_post(ibv_post_recv(qp, &wr, &bad_wr), what);
    }
}

/** @brief Leave the group (the kernel sends an IGMP leave for a full member). @param g the group joined */
inline void leave_group(Group &g)
{
    g.membership.leave();
}

} // namespace rdma_multicast
