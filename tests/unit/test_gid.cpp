/** @file test_gid.cpp @brief The best-GID choice, GID text, access flags text. */
#include <rdma_samples/check.hpp>
#include <rdma_samples/cm_address.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/memory.hpp>

#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstring>

using namespace rdma_samples;

namespace {
GidEntry entry(int index, const char *text, GidType type)
{
    GidEntry e;
    e.index = index;
    e.type = type;
    ibv_gid g{};
    EXPECT_TRUE(gid_from_string(text, g)) << text;
    std::memcpy(e.raw.data(), g.raw, 16);
    return e;
}
} // namespace

TEST(Gid, SoftRoceOnLoopbackPicksTheIpv4MappedRoceV2Gid)
{
    // rxe bound to lo: index 0 is link-local (RTR fails with "Network is unreachable"), 1 is ::ffff:127.0.0.1.
    const std::vector<GidEntry> t = {entry(0, "fe80::1", GidType::roce_v2),
                                     entry(1, "::ffff:127.0.0.1", GidType::roce_v2)};
    EXPECT_EQ(choose_gid_index(t, false), 1);
}

TEST(Gid, PrefersRoceV2OverV1AndIpv4OverIpv6)
{
    const std::vector<GidEntry> t = {
        entry(0, "fe80::5054:ff:fe12:3456", GidType::roce_v1), entry(1, "fe80::5054:ff:fe12:3456", GidType::roce_v2),
        entry(2, "::ffff:10.77.0.1", GidType::roce_v1),        entry(3, "2001:db8::1", GidType::roce_v2),
        entry(4, "::ffff:10.77.0.1", GidType::roce_v2),
    };
    EXPECT_EQ(choose_gid_index(t, false), 4);
    const std::vector<GidEntry> no_v4 = {t[0], t[1], t[3]};
    EXPECT_EQ(choose_gid_index(no_v4, false), 3);
    const std::vector<GidEntry> only_v1 = {t[0], t[2]};
    EXPECT_EQ(choose_gid_index(only_v1, false), 2);
}

TEST(Gid, LinkLocalOnlyWhenNothingBetterAndEmptyTable)
{
    EXPECT_EQ(choose_gid_index({entry(3, "fe80::1", GidType::roce_v2)}, false), 3);
    EXPECT_EQ(choose_gid_index({}, false), -1);
}

TEST(Gid, InfinibandUsesIndexZero)
{
    const std::vector<GidEntry> t = {entry(0, "fe80::2", GidType::ib), entry(1, "::ffff:10.0.0.1", GidType::ib)};
    EXPECT_EQ(choose_gid_index(t, true), 0);
}

TEST(Gid, TextRoundTrip)
{
    ibv_gid g{};
    ASSERT_TRUE(gid_from_string("::ffff:10.77.0.2", g));
    EXPECT_EQ(gid_to_string(g), "::ffff:10.77.0.2");
    EXPECT_FALSE(gid_from_string("10.77.0.2", g));
    EXPECT_FALSE(gid_from_string("", g));
    // inet_pton stops at a NUL: the text must not pass for the GID before it.
    EXPECT_FALSE(gid_from_string(std::string("::1\0junk", 8), g));
}

TEST(ServerAddr, EachTypeAndItsErrors)
{
    SockAddr a = parse_server_addr("10.77.0.1", AddrType::ipv4, 13579);
    EXPECT_EQ(a.get()->sa_family, AF_INET);
    a = parse_server_addr("::ffff:10.77.0.1", AddrType::gid, 13579);
    EXPECT_EQ(a.get()->sa_family, AF_INET); // an IPv4-mapped GID is the IPv4 address
    a = parse_server_addr("fd00::2", AddrType::ipv6, 13579);
    EXPECT_EQ(a.get()->sa_family, AF_INET6);
    EXPECT_THROW(parse_server_addr("fe80::1", AddrType::gid, 13579), Error);
    EXPECT_THROW(parse_server_addr(std::string("10.77.0.1\0junk", 14), AddrType::ipv4, 13579), Error);
    // Found by fuzz_address (tests/fuzz/regressions/address): the value reached the message raw.
    try {
        parse_server_addr("10f\x1a:d0", AddrType::ipv6, 13579);
        FAIL() << "accepted";
    } catch (const Error &e) {
        EXPECT_STREQ(e.what(), "-sa \"10f\\x1a:d0\" is not an IPv6 address");
    }
}

TEST(Access, TextRoundTrip)
{
    for (int a : std::initializer_list<int>{0, IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ,
                                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC})
        EXPECT_EQ(access_from_string(access_to_string(a)), a) << access_to_string(a);
    EXPECT_EQ(access_to_string(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE), "local_write|remote_write");
    EXPECT_EQ(access_from_string("remote_teleport"), -1);
    EXPECT_EQ(access_from_string(""), -1);
    EXPECT_EQ(access_from_string("local_write|"), -1);
}

TEST(Buffer, PageAlignedAndZeroed)
{
    Buffer b(300);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 4096, 0u);
    EXPECT_EQ(b.size(), 300u);
    for (std::size_t i = 0; i < b.size(); ++i)
        ASSERT_EQ(b.data()[i], 0);
}
