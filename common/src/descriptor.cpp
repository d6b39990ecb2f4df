/** @file descriptor.cpp @brief Descriptors as text: the format and its strict parser. */
#include <rdma_samples/check.hpp>
#include <rdma_samples/descriptor.hpp>
#include <rdma_samples/device.hpp>
#include <rdma_samples/memory.hpp>
#include <rdma_samples/text.hpp>

#include <cerrno>
#include <cstdio>
#include <map>
#include <random>
#include <sstream>
#include <vector>

namespace rdma_samples {

namespace {

constexpr const char *connection_header = "# rdma-samples connection descriptor";
constexpr const char *resource_header = "# rdma-samples resource descriptor";
constexpr const char *ud_header = "# rdma-samples UD descriptor";

/** The key=value lines of a descriptor, with the line number of each, and strict value readers. */
class Fields {
public:
    Fields(const std::string &text, const std::string &source) : source_(source)
    {
        std::istringstream in(text);
        std::string line;
        int n = 0;
        while (std::getline(in, line)) {
            ++n;
            if (line.empty() || line[0] == '#')
                continue;
            const auto eq = line.find('=');
            if (eq == std::string::npos || eq == 0)
                fail(n, "expected key=value, got " + quote(line));
            const std::string key = line.substr(0, eq);
            if (fields_.count(key))
                fail(n, quote(key) + ": appears twice");
            fields_[key] = {line.substr(eq + 1), n};
        }
        last_line_ = n;
        if (n == 0)
            throw DescriptorError(source_ + ": the file is empty");
    }

    /** Fail unless every key present is one of @p known. */
    void only(const std::vector<std::string> &known) const
    {
        for (const auto &[key, v] : fields_) {
            bool ok = false;
            for (const auto &k : known)
                ok = ok || k == key;
            if (!ok)
                fail(v.line, "unknown key " + quote(key));
        }
    }

    bool has(const std::string &key) const { return fields_.count(key) != 0; }

    const std::string &text(const std::string &key) const
    {
        auto it = fields_.find(key);
        if (it == fields_.end())
            fail(last_line_, "missing key \"" + key + "\" (is the file truncated?)");
        return it->second.value;
    }

    int line(const std::string &key) const { return fields_.at(key).line; }

    /** An unsigned number: hex (0x...) when @p want_hex, else decimal; within [0, max]. */
    std::uint64_t number(const std::string &key, std::uint64_t max, bool want_hex) const
    {
        const std::string &v = text(key);
        const std::string expected = std::string("expected ") + (want_hex ? "a hex number 0x..." : "a decimal number") +
                                     " up to " + (want_hex ? hex(max, 0) : std::to_string(max)) + ", got " + quote(v);
        const std::optional<std::uint64_t> out =
            parse_unsigned(v, want_hex ? NumberBase::hex : NumberBase::decimal, max);
        if (!out)
            fail(line(key), key + ": " + expected);
        return *out;
    }

    [[noreturn]] void fail(int line, const std::string &msg) const
    {
        throw DescriptorError(source_ + " line " + std::to_string(line) + ": " + msg);
    }

    void expect_header(const std::string &key, const std::string &want) const
    {
        if (text(key) != want)
            fail(line(key), key + ": expected " + want + ", got " + quote(text(key)));
    }

private:
    struct Value {
        std::string value;
        int line;
    };
    std::map<std::string, Value> fields_;
    std::string source_;
    int last_line_ = 0;
};

/** The fields a connection and a UD descriptor share: the GID and the MTU. */
ibv_gid parse_gid(const Fields &f)
{
    ibv_gid gid{};
    if (!gid_from_string(f.text("gid"), gid))
        f.fail(f.line("gid"),
               "gid: expected an IPv6-style GID such as ::ffff:10.0.0.1 or fe80::1, got " + quote(f.text("gid")));
    return gid;
}

int parse_mtu(const Fields &f)
{
    const auto mtu = f.number("mtu", 4096, false);
    if (mtu != 256 && mtu != 512 && mtu != 1024 && mtu != 2048 && mtu != 4096)
        f.fail(f.line("mtu"), "mtu: expected 256, 512, 1024, 2048 or 4096, got " + quote(f.text("mtu")));
    return static_cast<int>(mtu);
}

} // namespace

std::uint64_t new_nonce()
{
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

const char *resource_kind_name(ResourceKind k)
{
    return k == ResourceKind::mmap ? "mmap" : "sync_event";
}

std::string format_descriptor(const ConnectionDescriptor &d)
{
    std::ostringstream o;
    o << connection_header << "\n"
      << "version=1\n"
      << "kind=connection\n"
      << "nonce=" << hex(d.nonce, 16) << "\n";
    if (d.peer_nonce)
        o << "peer_nonce=" << hex(*d.peer_nonce, 16) << "\n";
    o << "qp_num=" << hex(d.qp_num, 6) << "\n"
      << "psn=" << hex(d.psn, 6) << "\n"
      << "lid=" << hex(d.lid, 4) << "\n"
      << "gid=" << gid_to_string(d.gid) << "\n"
      << "mtu=" << d.mtu << "\n";
    return o.str();
}

std::string format_descriptor(const ResourceDescriptor &d)
{
    std::ostringstream o;
    o << resource_header << "\n"
      << "version=1\n"
      << "kind=" << resource_kind_name(d.kind) << "\n"
      << "nonce=" << hex(d.nonce, 16) << "\n";
    if (d.peer_nonce)
        o << "peer_nonce=" << hex(*d.peer_nonce, 16) << "\n";
    o << "addr=" << hex(d.addr, 16) << "\n"
      << "length=" << d.length << "\n"
      << "rkey=" << hex(d.rkey, 8) << "\n"
      << "access=" << access_to_string(d.access) << "\n";
    return o.str();
}

ConnectionDescriptor parse_connection_descriptor(const std::string &text, const std::string &source)
{
    Fields f(text, source);
    f.expect_header("version", "1");
    if (f.text("kind") != "connection")
        f.fail(f.line("kind"), "kind: expected connection, got " + quote(f.text("kind")) +
                                   " (is this the resource descriptor, given to -re by mistake?)");
    f.only({"version", "kind", "nonce", "peer_nonce", "qp_num", "psn", "lid", "gid", "mtu"});
    ConnectionDescriptor d;
    d.nonce = f.number("nonce", UINT64_MAX, true);
    if (f.has("peer_nonce"))
        d.peer_nonce = f.number("peer_nonce", UINT64_MAX, true);
    d.qp_num = static_cast<std::uint32_t>(f.number("qp_num", 0xffffff, true));
    d.psn = static_cast<std::uint32_t>(f.number("psn", 0xffffff, true));
    d.lid = static_cast<std::uint16_t>(f.number("lid", 0xffff, true));
    d.gid = parse_gid(f);
    d.mtu = parse_mtu(f);
    return d;
}

std::string format_descriptor(const UdDescriptor &d)
{
    std::ostringstream o;
    o << ud_header << "\n"
      << "version=1\n"
      << "kind=ud\n"
      << "nonce=" << hex(d.nonce, 16) << "\n";
    if (d.peer_nonce)
        o << "peer_nonce=" << hex(*d.peer_nonce, 16) << "\n";
    o << "qp_num=" << hex(d.qp_num, 6) << "\n"
      << "qkey=" << hex(d.qkey, 8) << "\n"
      << "lid=" << hex(d.lid, 4) << "\n"
      << "gid=" << gid_to_string(d.gid) << "\n"
      << "mtu=" << d.mtu << "\n";
    return o.str();
}

UdDescriptor parse_ud_descriptor(const std::string &text, const std::string &source)
{
    Fields f(text, source);
    f.expect_header("version", "1");
    if (f.text("kind") != "ud")
        f.fail(f.line("kind"),
               "kind: expected ud, got " + quote(f.text("kind")) +
                   " (is this the descriptor of another sample, or of an rdma_ud program's peer from another pair?)");
    f.only({"version", "kind", "nonce", "peer_nonce", "qp_num", "qkey", "lid", "gid", "mtu"});
    UdDescriptor d;
    d.nonce = f.number("nonce", UINT64_MAX, true);
    if (f.has("peer_nonce"))
        d.peer_nonce = f.number("peer_nonce", UINT64_MAX, true);
    d.qp_num = static_cast<std::uint32_t>(f.number("qp_num", 0xffffff, true));
    d.qkey = static_cast<std::uint32_t>(f.number("qkey", 0xffffffff, true));
    d.lid = static_cast<std::uint16_t>(f.number("lid", 0xffff, true));
    d.gid = parse_gid(f);
    d.mtu = parse_mtu(f);
    return d;
}

ResourceDescriptor parse_resource_descriptor(const std::string &text, const std::string &source, ResourceKind kind)
{
    Fields f(text, source);
    f.expect_header("version", "1");
    if (f.text("kind") != resource_kind_name(kind))
        f.fail(f.line("kind"),
               std::string("kind: expected ") + resource_kind_name(kind) + ", got " + quote(f.text("kind")));
    f.only({"version", "kind", "nonce", "peer_nonce", "addr", "length", "rkey", "access"});
    ResourceDescriptor d;
    d.kind = kind;
    d.nonce = f.number("nonce", UINT64_MAX, true);
    if (f.has("peer_nonce"))
        d.peer_nonce = f.number("peer_nonce", UINT64_MAX, true);
    d.addr = f.number("addr", UINT64_MAX, true);
    d.length = static_cast<std::uint32_t>(f.number("length", 1u << 30, false));
    if (d.length == 0)
        f.fail(f.line("length"), "length: expected at least 1 byte, got 0");
    if (d.addr > UINT64_MAX - d.length)
        f.fail(f.line("length"), "length: addr + length wraps around the address space");
    d.rkey = static_cast<std::uint32_t>(f.number("rkey", 0xffffffff, true));
    d.access = access_from_string(f.text("access"));
    if (d.access < 0)
        f.fail(f.line("access"),
               "access: expected flags such as local_write|remote_write, got " + quote(f.text("access")));
    return d;
}

} // namespace rdma_samples
