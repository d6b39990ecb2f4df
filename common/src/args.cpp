/** @file args.cpp @brief DOCA-compatible command line parsing and --help. */
#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/log.hpp>
#include <rdma_samples/text.hpp>

#include <cstdio>
#include <exception>
#include <sstream>

namespace rdma_samples {

namespace {

/** The flags every program may take; `when` says whether this program takes it. */
struct CommonFlag {
    const char *short_name; // without the dash: "d", "ld", "sat"
    const char *long_name;  // without the dashes
    const char *value_name; // nullptr for a switch
    const char *help;
    std::string default_text;
};

std::vector<CommonFlag> common_flags(const ProgramSpec &spec)
{
    std::vector<CommonFlag> f;
    if (spec.rdma_device) {
        f.push_back({"d", "device", "NAME", "RDMA device name", "first device with an active port"});
        f.push_back({"g", "gid-index", "INDEX", "GID index", "best GID: RoCE v2 with an IPv4 address"});
    }
    if (spec.descriptor_files) {
        f.push_back({"ld", "local-descriptor-path", "PATH", "where this side writes its connection descriptor",
                     default_local_descriptor_path});
        f.push_back({"re", "remote-descriptor-path", "PATH", "where this side reads the peer's connection descriptor",
                     default_remote_descriptor_path});
    }
    if (spec.resource_descriptor)
        f.push_back({"m", "remote-resource-descriptor-path", "PATH",
                     "mmap or sync-event descriptor (also --mmap-descriptor-path)", default_resource_descriptor_path});
    if (spec.rdma_cm) {
        if (spec.descriptor_files)
            f.push_back({"cm", "use-rdma-cm", nullptr, "connect with RDMA CM instead of descriptor files", "off"});
        else // accepted, so that the tools can start every pair's RDMA CM flow the same way
            f.push_back({"cm", "use-rdma-cm", nullptr, "always on: this program connects with RDMA CM only", "on"});
        f.push_back({"lp", "listen-port", "PORT", "RDMA CM port", std::to_string(default_cm_port)});
        f.push_back({"sa", "server-addr", "ADDR", "RDMA CM server address; given = client, absent = server", "none"});
        f.push_back({"sat", "server-addr-type", "TYPE", "how to read -sa: ipv4, ipv6 or gid", "ipv4"});
    }
    if (spec.message_flag == 's')
        f.push_back({"s", "send-string", "TEXT", "", std::string("\"") + default_message + "\""});
    if (spec.message_flag == 'r')
        f.push_back({"r", "read-string", "TEXT", "", std::string("\"") + default_message + "\""});
    if (spec.message_flag == 'w')
        f.push_back({"w", "write-string", "TEXT", "", std::string("\"") + default_message + "\""});
    if (spec.multi_conn)
        f.push_back({"nc", "num-connections", "N", "number of connections (1..1024)", "1"});
    f.push_back({"t", "timeout", "SECONDS",
                 spec.rdma_device ? "how long any single wait may last (peer file, completion, CM event)"
                                  : "how long any single wait may last (the connection, a message, a chunk)",
                 "30"});
    f.push_back({"v", "verbose", nullptr,
                 spec.rdma_device ? "print every verbs call with its arguments and result"
                                  : "print the socket calls that make the connection, with their results",
                 "off"});
    f.push_back({"h", "help", nullptr, "print this help and exit", ""});
    return f;
}

/** A value that ends up in messages must be plain text: no control byte, bounded length; names and addresses
 *  (@p ascii) are printable ASCII, paths may also hold other bytes (UTF-8 file names). */
void require_plain(const std::string &flag, const std::string &what, const std::string &v, std::size_t max, bool ascii)
{
    if (v.empty())
        throw UsageError(flag + ": the " + what + " is empty");
    if (v.size() > max)
        throw UsageError(flag + ": the " + what + " is " + std::to_string(v.size()) + " bytes; the limit is " +
                         std::to_string(max) + ", got " + quote(v));
    for (unsigned char c : v)
        if (c < 0x20 || c == 0x7f || (ascii && c > 0x7f))
            throw UsageError(flag + ": the " + what + " has a " +
                             (c > 0x7f ? "byte that is not ASCII" : "control character") + ", got " + quote(v));
}

void apply_common(Args &a, const std::string &name, const std::string &flag, const std::string &v)
{
    if (name == "device") {
        require_plain(flag, "device name", v, 64, true); // IBV_SYSFS_NAME_MAX
        a.device = v;
    } else if (name == "gid-index") {
        a.gid_index = static_cast<int>(parse_number(flag, v, 0, 255));
    } else if (name == "local-descriptor-path" || name == "remote-descriptor-path" ||
               name == "remote-resource-descriptor-path") {
        require_plain(flag, "path", v, 4095, false); // PATH_MAX, less the terminating NUL
        (name[0] == 'l'                     ? a.local_descriptor_path
         : name == "remote-descriptor-path" ? a.remote_descriptor_path
                                            : a.resource_descriptor_path) = v;
    } else if (name == "use-rdma-cm") {
        a.use_cm = true;
    } else if (name == "listen-port") {
        a.listen_port = static_cast<std::uint16_t>(parse_number(flag, v, 1, 65535));
    } else if (name == "server-addr") {
        require_plain(flag, "server address", v, 255, true);
        a.server_addr = v;
    } else if (name == "server-addr-type") {
        if (v == "ipv4")
            a.server_addr_type = AddrType::ipv4;
        else if (v == "ipv6")
            a.server_addr_type = AddrType::ipv6;
        else if (v == "gid")
            a.server_addr_type = AddrType::gid;
        else
            throw UsageError(flag + ": expected ipv4, ipv6 or gid, got " + quote(v));
    } else if (name == "send-string" || name == "read-string" || name == "write-string") {
        if (v.size() > max_message_length)
            throw UsageError(flag + ": the string is " + std::to_string(v.size()) + " bytes; the limit is " +
                             std::to_string(max_message_length));
        a.message = v;
    } else if (name == "num-connections") {
        a.num_connections = static_cast<int>(parse_number(flag, v, 1, 1024));
    } else if (name == "timeout") {
        a.timeout_s = static_cast<int>(parse_number(flag, v, 1, 86400));
    } else if (name == "verbose") {
        a.verbose = true;
    } else if (name == "help") {
        a.help = true;
    }
}

} // namespace

std::uint64_t parse_number(const std::string &flag, const std::string &text, std::uint64_t lo, std::uint64_t hi)
{
    const std::optional<std::uint64_t> v = parse_unsigned(text, NumberBase::either, hi);
    if (!v || *v < lo)
        throw UsageError(flag + ": expected a number from " + std::to_string(lo) + " to " + std::to_string(hi) +
                         ", got " + quote(text));
    return *v;
}

Args parse_args(const ProgramSpec &spec, int argc, const char *const *argv)
{
    Args a;
    a.use_cm = !spec.descriptor_files; // an RDMA CM program only: no -cm to give
    const auto flags = common_flags(spec);
    bool have_operand = false;
    for (int i = 1; i < argc; ++i) {
        std::string tok = argv[i];
        std::string value;
        bool has_inline_value = false;
        if (spec.operand && !have_operand && (tok.empty() || tok[0] != '-' || tok == "-")) {
            spec.operand(tok);
            have_operand = true;
            continue;
        }
        if (tok.rfind("--", 0) == 0) {
            if (auto eq = tok.find('='); eq != std::string::npos) {
                value = tok.substr(eq + 1);
                tok.resize(eq);
                has_inline_value = true;
            }
        } else if (tok.size() < 2 || tok[0] != '-') {
            throw UsageError("unexpected argument " + quote(tok) + " (flags start with -; see --help)");
        }
        const bool is_long = tok.rfind("--", 0) == 0;
        const std::string name = tok.substr(is_long ? 2 : 1);

        // Which flag is it? Common flags by short or long name, then the program's own (long only).
        const CommonFlag *common = nullptr;
        for (const auto &f : flags)
            if ((is_long && (name == f.long_name || (std::string(f.long_name) == "remote-resource-descriptor-path" &&
                                                     name == "mmap-descriptor-path"))) ||
                (!is_long && name == f.short_name))
                common = &f;
        const ExtraFlag *extra = nullptr;
        if (common == nullptr)
            for (const auto &f : spec.extra)
                if ((is_long && name == f.long_name) || (!is_long && !f.short_name.empty() && name == f.short_name))
                    extra = &f;
        if (common == nullptr && extra == nullptr)
            throw UsageError("unknown flag " + quote(tok) + " (see --help)");

        const bool takes_value = common ? common->value_name != nullptr : !extra->value_name.empty();
        if (takes_value && !has_inline_value) {
            if (i + 1 >= argc)
                throw UsageError(tok + ": missing value"); // tok is a known flag
            value = argv[++i];
        } else if (!takes_value && has_inline_value) {
            throw UsageError(tok + ": takes no value");
        }
        if (common)
            apply_common(a, common->long_name, tok, value);
        else
            extra->apply(value);
    }
    if (a.help)
        return a;
    if (spec.operand && !have_operand)
        throw UsageError("missing " + spec.operand_name + " (see --help)");
    if (a.server_addr && !a.use_cm)
        throw UsageError("-sa/--server-addr needs -cm/--use-rdma-cm");
    if (spec.multi_conn && a.use_cm && a.server_addr && a.num_connections > 1)
        throw UsageError("-nc " + std::to_string(a.num_connections) +
                         ": an RDMA CM client makes one connection; start one client per connection "
                         "(the server, without -sa, takes -nc N)");
    if (spec.rdma_cm && !spec.multi_conn && a.use_cm) {
        // A pair's roles are fixed: the requester (or sender) connects, the responder (or receiver) listens.
        const bool client = spec.role == "requester" || spec.role == "sender" || spec.role == "client";
        const std::string cm = spec.descriptor_files ? "-cm: " : ""; // (an RDMA CM program only has no -cm)
        if (client && !a.server_addr)
            throw UsageError(cm + "the " + spec.role + " connects to the other side; give its address with -sa ADDR");
        if (!client && a.server_addr)
            throw UsageError(cm + "the " + spec.role + " listens and takes no -sa; give -sa " + *a.server_addr +
                             " to the side that connects");
    }
    if (!a.use_cm && a.local_descriptor_path == a.remote_descriptor_path)
        throw UsageError("-ld and -re name the same file " + quote(a.local_descriptor_path, 200) +
                         "; this side would read its own descriptor");
    return a;
}

std::string usage(const ProgramSpec &spec)
{
    std::ostringstream o;
    o << "Usage: " << spec.name << " [flags]" << (spec.operand ? " " + spec.operand_name : "") << "\n"
      << spec.summary << "\n\n";
    if (spec.operand)
        o << "  " << spec.operand_name << ": " << spec.operand_help << "\n\n";
    o << "Flags:\n";
    auto line = [&](const std::string &names, const std::string &help, const std::string &def) {
        o << "  " << names;
        for (std::size_t n = names.size(); n < 44; ++n)
            o << ' ';
        o << help;
        if (!def.empty())
            o << " (default: " << def << ")";
        o << "\n";
    };
    for (const auto &f : common_flags(spec)) {
        std::string names = std::string("-") + f.short_name + ", --" + f.long_name;
        if (f.value_name)
            names += std::string(" ") + f.value_name;
        std::string help = f.help;
        if (help.empty())
            help = spec.message_help + " (at most " + std::to_string(max_message_length) + " bytes)";
        line(names, help, f.default_text);
    }
    for (const auto &f : spec.extra)
        line((f.short_name.empty() ? "" : "-" + f.short_name + ", ") + "--" + f.long_name +
                 (f.value_name.empty() ? "" : " " + f.value_name),
             f.help, f.default_text);
    return o.str();
}

} // namespace rdma_samples
