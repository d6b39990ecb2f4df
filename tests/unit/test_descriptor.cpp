/** @file test_descriptor.cpp @brief Descriptor files: round trip, strict rejection, atomic write, stale nonces. */
#include <rdma_samples/check.hpp>
#include <rdma_samples/descriptor.hpp>
#include <rdma_samples/descriptor_file.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/text.hpp>

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

using namespace rdma_samples;

namespace {

ConnectionDescriptor sample_connection()
{
    ConnectionDescriptor d;
    d.nonce = 0x0123456789abcdefULL;
    d.qp_num = 0x11;
    d.psn = 0x5d8c19;
    d.lid = 0;
    gid_from_string("::ffff:10.77.0.1", d.gid);
    d.mtu = 1024;
    return d;
}

ResourceDescriptor sample_mmap()
{
    ResourceDescriptor d;
    d.kind = ResourceKind::mmap;
    d.nonce = 7;
    d.peer_nonce = 0x0123456789abcdefULL;
    d.addr = 0x7f0000001000ULL;
    d.length = 256;
    d.rkey = 0x1234;
    d.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    return d;
}

/** Replace the line starting with "key=" by @p line (or drop it if @p line is empty). */
std::string with_line(const std::string &text, const std::string &key, const std::string &line)
{
    std::istringstream in(text);
    std::string out, l;
    while (std::getline(in, l)) {
        if (l.rfind(key + "=", 0) == 0) {
            if (!line.empty())
                out += line + "\n";
        } else {
            out += l + "\n";
        }
    }
    return out;
}

std::string conn_error(const std::string &text)
{
    try {
        parse_connection_descriptor(text, "/tmp/d.txt");
    } catch (const DescriptorError &e) {
        return e.what();
    }
    return "";
}

class TempDir : public ::testing::Test {
protected:
    void SetUp() override
    {
        dir =
            std::filesystem::temp_directory_path() / ("rdma-samples-unit-" + std::to_string(::getpid()) + "-" +
                                                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::create_directories(dir);
    }
    void TearDown() override { std::filesystem::remove_all(dir); }
    std::filesystem::path dir;
};

} // namespace

TEST(Descriptor, ConnectionRoundTrip)
{
    ConnectionDescriptor d = sample_connection();
    d.peer_nonce = 42;
    const std::string text = format_descriptor(d);
    EXPECT_NE(text.find("qp_num=0x000011\n"), std::string::npos);
    EXPECT_NE(text.find("gid=::ffff:10.77.0.1\n"), std::string::npos);
    const ConnectionDescriptor back = parse_connection_descriptor(text, "x");
    EXPECT_EQ(back.nonce, d.nonce);
    EXPECT_EQ(back.peer_nonce, 42u);
    EXPECT_EQ(back.qp_num, d.qp_num);
    EXPECT_EQ(back.psn, d.psn);
    EXPECT_EQ(back.lid, d.lid);
    EXPECT_EQ(0, memcmp(back.gid.raw, d.gid.raw, 16));
    EXPECT_EQ(back.mtu, 1024);
}

TEST(Descriptor, ResourceRoundTrip)
{
    const ResourceDescriptor d = sample_mmap();
    const ResourceDescriptor back = parse_resource_descriptor(format_descriptor(d), "x", ResourceKind::mmap);
    EXPECT_EQ(back.addr, d.addr);
    EXPECT_EQ(back.length, d.length);
    EXPECT_EQ(back.rkey, d.rkey);
    EXPECT_EQ(back.access, d.access);
    EXPECT_EQ(back.peer_nonce, d.peer_nonce);
    ResourceDescriptor se = d;
    se.kind = ResourceKind::sync_event;
    se.length = 8;
    se.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
    EXPECT_EQ(parse_resource_descriptor(format_descriptor(se), "x", ResourceKind::sync_event).access, se.access);
}

TEST(Descriptor, EveryMalformedFieldIsRejectedWithFileLineAndExpectation)
{
    const std::string good = format_descriptor(sample_connection());
    struct Case {
        std::string key, line, expect;
    };
    const Case cases[] = {
        {"qp_num", "qp_num=0x1000000", "line 5: qp_num: expected a hex number 0x... up to 0xffffff"},
        {"qp_num", "qp_num=17", "qp_num: expected a hex number"},
        {"qp_num", "qp_num=0xzz", "qp_num: expected a hex number"},
        {"qp_num", "qp_num=", "qp_num: expected a hex number"},
        {"psn", "psn=0xffffffffffffffffff", "psn: expected a hex number"},
        {"lid", "lid=0x10000", "lid: expected a hex number 0x... up to 0xffff"},
        {"gid", "gid=10.0.0.1", "gid: expected an IPv6-style GID"},
        {"gid", "gid=::ffff:10.0.0.1x", "gid: expected an IPv6-style GID"},
        {"mtu", "mtu=1500", "mtu: expected 256, 512, 1024, 2048 or 4096"},
        {"mtu", "mtu=-1", "mtu: expected a decimal number"},
        {"nonce", "nonce=0x1g", "nonce: expected a hex number"},
        {"version", "version=2", "version: expected 1"},
        {"kind", "kind=mmap", "kind: expected connection"},
        {"qp_num", "", "missing key \"qp_num\" (is the file truncated?)"},
        {"gid", "", "missing key \"gid\""},
        {"mtu", "mtu=1024\nmtu=1024", "\"mtu\": appears twice"},
        {"mtu", "mtu=1024\ncolour=blue", "unknown key \"colour\""},
        {"mtu", "mtu=1024\ngarbage", "expected key=value, got \"garbage\""},
    };
    for (const auto &c : cases) {
        const std::string err = conn_error(with_line(good, c.key, c.line));
        EXPECT_NE(err.find("/tmp/d.txt"), std::string::npos) << c.line << " -> " << err;
        EXPECT_NE(err.find(c.expect), std::string::npos) << c.line << " -> " << err;
        EXPECT_NE(err.find(" line "), std::string::npos) << c.line << " -> " << err;
    }
}

TEST(Descriptor, TruncatedOrEmptyFileIsRejected)
{
    const std::string good = format_descriptor(sample_connection());
    EXPECT_NE(conn_error(good.substr(0, good.size() / 2)), "");
    EXPECT_NE(conn_error(""), "");
    EXPECT_NE(conn_error("\n\n"), "");
}

TEST(Descriptor, ResourceRejectsWrongKindHugeLengthZeroLengthWrapAndBadAccess)
{
    const std::string good = format_descriptor(sample_mmap());
    auto err = [](const std::string &t, ResourceKind k = ResourceKind::mmap) {
        try {
            parse_resource_descriptor(t, "/tmp/m.txt", k);
        } catch (const DescriptorError &e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_NE(err(good, ResourceKind::sync_event).find("kind: expected sync_event, got \"mmap\""), std::string::npos);
    EXPECT_NE(err(with_line(good, "length", "length=99999999999")).find("length: expected a decimal number"),
              std::string::npos);
    EXPECT_NE(err(with_line(good, "length", "length=0")).find("length: expected at least 1 byte"), std::string::npos);
    EXPECT_NE(err(with_line(with_line(good, "addr", "addr=0xffffffffffffff00"), "length", "length=512")).find("wraps"),
              std::string::npos);
    EXPECT_NE(err(with_line(good, "rkey", "rkey=0x100000000")).find("rkey: expected"), std::string::npos);
    EXPECT_NE(err(with_line(good, "access", "access=remote_everything")).find("access: expected"), std::string::npos);
    EXPECT_NE(err(with_line(good, "access", "access=remote_write|remote_write")).find("access: expected"),
              std::string::npos);
    EXPECT_NE(err(with_line(good, "rkey", "")).find("missing key \"rkey\""), std::string::npos);
    EXPECT_NE(err(format_descriptor(sample_connection())).find("kind: expected mmap"), std::string::npos);
}

TEST(Descriptor, UdRoundTripAndStrictRejection)
{
    UdDescriptor d;
    d.nonce = 9;
    d.peer_nonce = 0x0123456789abcdefULL;
    d.qp_num = 0x1a;
    d.qkey = 0x11111111;
    gid_from_string("::ffff:10.77.0.1", d.gid);
    d.mtu = 4096;
    const std::string good = format_descriptor(d);
    EXPECT_NE(good.find("kind=ud\n"), std::string::npos);
    EXPECT_NE(good.find("qkey=0x11111111\n"), std::string::npos);
    const UdDescriptor back = parse_ud_descriptor(good, "x");
    EXPECT_EQ(back.nonce, d.nonce);
    EXPECT_EQ(back.peer_nonce, d.peer_nonce);
    EXPECT_EQ(back.qp_num, d.qp_num);
    EXPECT_EQ(back.qkey, d.qkey);
    EXPECT_EQ(0, memcmp(back.gid.raw, d.gid.raw, 16));
    EXPECT_EQ(back.mtu, 4096);
    auto err = [](const std::string &t) {
        try {
            parse_ud_descriptor(t, "/tmp/u.txt");
        } catch (const DescriptorError &e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_NE(
        err(with_line(good, "qkey", "qkey=0x100000000")).find("qkey: expected a hex number 0x... up to 0xffffffff"),
        std::string::npos);
    EXPECT_NE(err(with_line(good, "qkey", "")).find("missing key \"qkey\""), std::string::npos);
    EXPECT_NE(err(with_line(good, "mtu", "mtu=1500")).find("mtu: expected 256, 512"), std::string::npos);
    EXPECT_NE(err(with_line(good, "gid", "gid=10.0.0.1")).find("gid: expected an IPv6-style GID"), std::string::npos);
    EXPECT_NE(err(with_line(good, "qkey", "qkey=0x1\npsn=0x1")).find("unknown key \"psn\""), std::string::npos);
    // A connection descriptor is not a UD one, and the other way round.
    EXPECT_NE(err(format_descriptor(sample_connection())).find("kind: expected ud, got \"connection\""),
              std::string::npos);
    EXPECT_NE(conn_error(good).find("kind: expected connection, got \"ud\""), std::string::npos);
}

// (In the anonymous namespace with their fixture: a unity build compiles this file inside another.)
namespace {

TEST_F(TempDir, AtomicWriteThenWaitReadsAndRemoves)
{
    const std::string path = (dir / "conn.txt").string();
    write_descriptor_file(path, format_descriptor(sample_connection()));
    EXPECT_TRUE(std::filesystem::exists(path));
    for (const auto &e : std::filesystem::directory_iterator(dir))
        EXPECT_EQ(e.path().filename(), "conn.txt") << "temporary file left behind";
    const ConnectionDescriptor d = wait_for_connection_descriptor({path, "the test", 2, std::nullopt});
    EXPECT_EQ(d.qp_num, 0x11u);
    EXPECT_FALSE(std::filesystem::exists(path)) << "a consumed descriptor must be removed";
}

TEST_F(TempDir, WriteIntoMissingFolderExplainsItself)
{
    try {
        write_descriptor_file((dir / "no" / "such" / "x.txt").string(), "x");
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos);
        EXPECT_NE(e.hint().find("folder does not exist"), std::string::npos);
    }
}

TEST_F(TempDir, StaleAnswerIsIgnoredUntilTheLiveOneArrives)
{
    const std::string path = (dir / "answer.txt").string();
    ConnectionDescriptor stale = sample_connection();
    stale.peer_nonce = 111; // answers an earlier run
    write_descriptor_file(path, format_descriptor(stale));
    std::thread live([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        ConnectionDescriptor fresh = sample_connection();
        fresh.qp_num = 0x22;
        fresh.peer_nonce = 222;
        write_descriptor_file(path, format_descriptor(fresh));
    });
    const ConnectionDescriptor d = wait_for_connection_descriptor({path, "the test", 5, 222});
    live.join();
    EXPECT_EQ(d.qp_num, 0x22u);
    EXPECT_EQ(d.peer_nonce, 222u);
}

TEST_F(TempDir, OnlyAStaleAnswerTimesOutNamingTheFileAndTheWriter)
{
    const std::string path = (dir / "answer.txt").string();
    ConnectionDescriptor stale = sample_connection();
    stale.peer_nonce = 111;
    write_descriptor_file(path, format_descriptor(stale));
    const auto t0 = std::chrono::steady_clock::now();
    try {
        wait_for_connection_descriptor({path, "the responder", 1, 222});
        FAIL() << "no timeout";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("timed out after 1 s waiting for " + path + " from the responder"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
    EXPECT_TRUE(std::filesystem::exists(path)) << "a stale file is not ours to remove";
}

TEST_F(TempDir, MalformedFileThatStaysMalformedIsAnError)
{
    const std::string path = (dir / "bad.txt").string();
    std::ofstream(path) << "version=1\nkind=connection\nqp_num=oops\n";
    EXPECT_THROW(wait_for_connection_descriptor({path, "the test", 5, std::nullopt}), DescriptorError);
}

} // namespace

// Whatever sits at a descriptor path, reading it is bounded: an answer at once, never more than the cap.
namespace {
std::string read_error(const std::string &path)
{
    bool exists = false;
    try {
        read_descriptor_text(path, exists);
    } catch (const DescriptorError &e) {
        EXPECT_TRUE(exists);
        return e.what();
    }
    return "(no error)";
}
} // namespace

TEST(DescriptorRead, MissingIsNotAnError)
{
    bool exists = true;
    EXPECT_EQ(read_descriptor_text("/nonexistent/dir/file.desc", exists), "");
    EXPECT_FALSE(exists);
}

TEST(DescriptorRead, DirectoryIsNamed)
{
    const auto dir = std::filesystem::temp_directory_path() / ("desc-dir-" + std::to_string(::getpid()));
    std::filesystem::create_directory(dir);
    EXPECT_NE(read_error(dir.string()).find(": is a directory"), std::string::npos);
    std::filesystem::remove(dir);
}

TEST(DescriptorRead, FifoAndSymlinkToItReturnAtOnce)
{
    const auto fifo = std::filesystem::temp_directory_path() / ("desc-fifo-" + std::to_string(::getpid()));
    const auto link = std::filesystem::temp_directory_path() / ("desc-link-" + std::to_string(::getpid()));
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    std::filesystem::create_symlink(fifo, link);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_NE(read_error(fifo.string()).find(": is a FIFO, not a regular file"), std::string::npos);
    EXPECT_NE(read_error(link.string()).find(": is a FIFO, not a regular file"), std::string::npos);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
    std::filesystem::remove(link);
    std::filesystem::remove(fifo);
}

TEST(DescriptorRead, DeviceNodeNeverRead)
{
    EXPECT_NE(read_error("/dev/zero").find(": is a device or special file"), std::string::npos);
    EXPECT_NE(read_error("/dev/null").find(": is a device or special file"), std::string::npos);
}

TEST(DescriptorRead, HugeFileIsTooLarge)
{
    const auto path = std::filesystem::temp_directory_path() / ("desc-huge-" + std::to_string(::getpid()));
    std::ofstream(path) << std::string(1 << 20, 'x');
    EXPECT_NE(read_error(path.string()).find(": is too large (1048576 bytes"), std::string::npos);
    std::filesystem::remove(path);
}

TEST(DescriptorRead, SmallFileReadWhole)
{
    const auto path = std::filesystem::temp_directory_path() / ("desc-small-" + std::to_string(::getpid()));
    const std::string text = format_descriptor(sample_connection());
    std::ofstream(path) << text;
    bool exists = false;
    EXPECT_EQ(read_descriptor_text(path.string(), exists), text);
    EXPECT_TRUE(exists);
    std::filesystem::remove(path);
}

// Bytes that are not text reach the message escaped and cut: no raw control byte, no endless line.
TEST(DescriptorRead, BadBytesQuotedInErrors)
{
    std::string text = format_descriptor(sample_connection());
    const std::string evil = std::string("0x1\r\x1b[2J\0zz", 11) + std::string(100000, 'A');
    text.replace(text.find("qp_num=") + 7, 8, evil);
    try {
        parse_connection_descriptor(text, "x.desc");
        FAIL() << "accepted";
    } catch (const DescriptorError &e) {
        const std::string msg = e.what();
        EXPECT_LT(msg.size(), 300U);
        EXPECT_EQ(msg.find('\r'), std::string::npos);
        EXPECT_EQ(msg.find('\x1b'), std::string::npos);
        EXPECT_EQ(msg.find('\0'), std::string::npos);
        EXPECT_NE(msg.find("\\r\\x1b[2J\\x00zz"), std::string::npos) << msg;
        EXPECT_NE(msg.find("bytes)"), std::string::npos) << msg;
    }
}

// Found by fuzz_descriptor (tests/fuzz/regressions/descriptor): a duplicate key was named raw.
TEST(Descriptor, FuzzFindingDuplicateKeyIsQuoted)
{
    const std::string text = format_descriptor(sample_connection()) + "qp_nu\xb8\x1bm=1\nqp_nu\xb8\x1bm=2\n";
    try {
        parse_connection_descriptor(text, "x.desc");
        FAIL() << "accepted";
    } catch (const DescriptorError &e) {
        EXPECT_STREQ(e.what(), "x.desc line 11: \"qp_nu\\xb8\\x1bm\": appears twice");
    }
}

TEST(Quote, EscapesAndCuts)
{
    EXPECT_EQ(quote("abc"), "\"abc\"");
    EXPECT_EQ(quote(std::string("a\0b", 3)), "\"a\\x00b\"");
    EXPECT_EQ(quote("tab\tnl\ncr\r\"q\"\\"), "\"tab\\tnl\\ncr\\r\\\"q\\\"\\\\\"");
    EXPECT_EQ(quote("\xc3\xa9"), "\"\\xc3\\xa9\"");
    EXPECT_EQ(quote(std::string(100, 'x'), 4), "\"xxxx...\" (100 bytes)");
}

TEST(Descriptor, AMalformedFileIsAnErrorWithAHint)
{
    try {
        parse_connection_descriptor("version=1\n", "peer.desc");
        FAIL() << "no error";
    } catch (const Error &e) { // DescriptorError is an Error: main() prints it and its hint like any other
        EXPECT_NE(dynamic_cast<const DescriptorError *>(&e), nullptr);
        EXPECT_NE(std::string(e.what()).find("peer.desc"), std::string::npos);
        EXPECT_NE(e.hint().find("copy it again"), std::string::npos);
    }
}
