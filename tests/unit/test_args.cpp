/** @file test_args.cpp @brief The command line: DOCA's spellings, defaults, and every kind of bad value. */
#include <rdma_samples/args.hpp>

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

using namespace rdma_samples;

namespace {

ProgramSpec spec_with(char message_flag, bool cm = true, bool multi = false)
{
    ProgramSpec s;
    s.name = "prog";
    s.role = "requester";
    s.summary = "test program";
    s.message_flag = message_flag;
    s.message_help = "string";
    s.rdma_cm = cm;
    s.multi_conn = multi;
    return s;
}

Args parse(const ProgramSpec &spec, std::initializer_list<const char *> words)
{
    std::vector<const char *> argv{"prog"};
    argv.insert(argv.end(), words);
    return parse_args(spec, static_cast<int>(argv.size()), argv.data());
}

} // namespace

TEST(Args, DefaultsMatchDoca)
{
    const Args a = parse(spec_with('w'), {});
    EXPECT_EQ(a.device, "");
    EXPECT_FALSE(a.gid_index.has_value());
    EXPECT_EQ(a.local_descriptor_path, "/tmp/local_connection_desc_path.txt");
    EXPECT_EQ(a.remote_descriptor_path, "/tmp/remote_connection_desc_path.txt");
    EXPECT_EQ(a.resource_descriptor_path, "/tmp/remote_resource_desc_path.txt");
    EXPECT_EQ(a.message, "Hi RDMA!");
    EXPECT_EQ(a.listen_port, 13579);
    EXPECT_EQ(a.timeout_s, 30);
    EXPECT_FALSE(a.use_cm);
    EXPECT_FALSE(a.verbose);
}

TEST(Args, DocaShortFlags)
{
    const Args a =
        parse(spec_with('w', true, true),
              {"-d",   "rxe0", "-g",       "1",    "-ld",  "/x/l", "-re",   "/x/r", "-m", "/x/m", "-cm", "-lp",
               "4791", "-sa",  "10.0.0.1", "-sat", "ipv6", "-w",   "hello", "-nc",  "1",  "-t",   "5",   "-v"});
    EXPECT_EQ(a.device, "rxe0");
    EXPECT_EQ(a.gid_index, 1);
    EXPECT_EQ(a.local_descriptor_path, "/x/l");
    EXPECT_EQ(a.remote_descriptor_path, "/x/r");
    EXPECT_EQ(a.resource_descriptor_path, "/x/m");
    EXPECT_TRUE(a.use_cm);
    EXPECT_EQ(a.listen_port, 4791);
    EXPECT_EQ(a.server_addr, "10.0.0.1");
    EXPECT_EQ(a.server_addr_type, AddrType::ipv6);
    EXPECT_EQ(a.message, "hello");
    EXPECT_EQ(a.num_connections, 1);
    EXPECT_EQ(a.timeout_s, 5);
    EXPECT_TRUE(a.verbose);
    // -nc N belongs to the side that takes N connections: descriptor files, or the RDMA CM server.
    EXPECT_EQ(parse(spec_with('w', true, true), {"-nc", "8"}).num_connections, 8);
    EXPECT_EQ(parse(spec_with('w', true, true), {"-cm", "-nc", "64"}).num_connections, 64);
    // An RDMA CM client (-sa) makes exactly one connection.
    EXPECT_THROW(parse(spec_with('w', true, true), {"-cm", "-sa", "10.0.0.1", "-nc", "8"}), UsageError);
}

TEST(Args, DocaLongFlagsWithSpaceOrEquals)
{
    const Args a = parse(spec_with('s'), {"--device=mlx5_0", "--gid-index", "3", "--local-descriptor-path=/a",
                                          "--remote-descriptor-path", "/b", "--mmap-descriptor-path", "/c",
                                          "--send-string=a b c", "--timeout=7", "--server-addr-type=gid"});
    EXPECT_EQ(a.device, "mlx5_0");
    EXPECT_EQ(a.gid_index, 3);
    EXPECT_EQ(a.local_descriptor_path, "/a");
    EXPECT_EQ(a.remote_descriptor_path, "/b");
    EXPECT_EQ(a.resource_descriptor_path, "/c");
    EXPECT_EQ(a.message, "a b c");
    EXPECT_EQ(a.timeout_s, 7);
    EXPECT_EQ(a.server_addr_type, AddrType::gid);
    const Args b = parse(spec_with('r'), {"--remote-resource-descriptor-path", "/d", "--read-string", "x"});
    EXPECT_EQ(b.resource_descriptor_path, "/d");
    EXPECT_EQ(b.message, "x");
}

TEST(Args, HexNumbersAndHelp)
{
    EXPECT_EQ(parse(spec_with(0), {"-g", "0x2"}).gid_index, 2);
    EXPECT_TRUE(parse(spec_with(0), {"-h"}).help);
    EXPECT_TRUE(parse(spec_with(0), {"--help"}).help);
}

TEST(Args, MessageOfExactly256BytesIsAccepted)
{
    const std::string s(256, 'x');
    EXPECT_EQ(parse(spec_with('w'), {"-w", s.c_str()}).message.size(), 256u);
}

TEST(Args, BadInputIsAUsageError)
{
    const std::string long_msg(257, 'x');
    const std::vector<std::vector<const char *>> bad = {
        {"--bogus"},
        {"-x"},
        {"stray"},
        {"-d"},     // missing value
        {"-d", ""}, // empty device
        {"-g", "abc"},
        {"-g", "-1"},
        {"-g", "256"},
        {"-g", "99999999999999999999999"},
        {"-t", "0"},
        {"-t", "1.5"},
        {"-lp", "0"},
        {"-lp", "65536"},
        {"-sat", "ipx"},
        {"-w", long_msg.c_str()},
        {"-s", "x"},        // a write program takes no -s
        {"-nc", "2"},       // only multi_conn takes -nc
        {"-sa", "1.2.3.4"}, // -sa without -cm
        {"-ld", "/same", "-re", "/same"},
        {"-v=1"}, // a switch takes no value
        {"--timeout="},
    };
    for (const auto &words : bad) {
        std::vector<const char *> argv{"prog"};
        argv.insert(argv.end(), words.begin(), words.end());
        EXPECT_THROW(parse_args(spec_with('w'), static_cast<int>(argv.size()), argv.data()), UsageError)
            << "accepted: " << words[0];
    }
}

TEST(Args, CmFlagsOnlyWhereSupported)
{
    EXPECT_THROW(parse(spec_with('w', false), {"-cm"}), UsageError);
    EXPECT_TRUE(parse(spec_with('w', true), {"-cm", "-sa", "10.0.0.1"}).use_cm);
}

TEST(Args, CmRolesOfAPairAreFixed)
{
    // The requester (or sender) connects: -cm needs -sa.
    EXPECT_THROW(parse(spec_with('w', true), {"-cm"}), UsageError);
    // The responder (or receiver) listens: -sa is refused, and the message says where it belongs.
    ProgramSpec responder = spec_with(0, true);
    responder.role = "responder";
    EXPECT_TRUE(parse(responder, {"-cm"}).use_cm);
    try {
        parse(responder, {"-cm", "-sa", "10.0.0.1"});
        FAIL() << "-sa on a responder was accepted";
    } catch (const UsageError &e) {
        EXPECT_STREQ(e.what(),
                     "-cm: the responder listens and takes no -sa; give -sa 10.0.0.1 to the side that connects");
    }
    // rdma_multi_conn has no fixed roles: -sa makes a client, no -sa a server.
    EXPECT_TRUE(parse(spec_with('s', true, true), {"-cm"}).use_cm);
    EXPECT_TRUE(parse(spec_with('s', true, true), {"-cm", "-sa", "10.0.0.1"}).server_addr.has_value());
}

TEST(Args, ErrorMessageNamesFlagAndRange)
{
    try {
        parse(spec_with('w'), {"-t", "0"});
        FAIL() << "no error";
    } catch (const UsageError &e) {
        EXPECT_STREQ(e.what(), "-t: expected a number from 1 to 86400, got \"0\"");
    }
}

TEST(Args, ExtraFlags)
{
    ProgramSpec s = spec_with(0);
    std::string op = "both";
    bool demo = false;
    s.extra.push_back({"op", "OP", "operation", "both", [&](const std::string &v) {
                           if (v != "fetch-add" && v != "both")
                               throw UsageError("--op: bad");
                           op = v;
                       }});
    s.extra.push_back({"no-prepost", "", "demo", "", [&](const std::string &) { demo = true; }});
    parse(s, {"--op", "fetch-add", "--no-prepost"});
    EXPECT_EQ(op, "fetch-add");
    EXPECT_TRUE(demo);
    EXPECT_THROW(parse(s, {"--op", "nope"}), UsageError);
    EXPECT_THROW(parse(s, {"-op", "both"}), UsageError); // program flags are long only
}

TEST(Args, HelpListsEveryFlagWithDefault)
{
    const std::string u = usage(spec_with('w', true, true));
    for (const char *f :
         {"-d, --device", "-g, --gid-index", "-ld, --local-descriptor-path", "-re, --remote-descriptor-path",
          "-m, --remote-resource-descriptor-path", "-cm, --use-rdma-cm", "-lp, --listen-port", "-sa, --server-addr",
          "-sat, --server-addr-type", "-w, --write-string", "-nc, --num-connections", "-t, --timeout", "-v, --verbose",
          "-h, --help", "(default: 30)", "(default: 13579)", "(default: \"Hi RDMA!\")",
          "(default: /tmp/local_connection_desc_path.txt)"})
        EXPECT_NE(u.find(f), std::string::npos) << f;
}

// Found by fuzz_args (tests/fuzz/regressions/args): a value or a flag with bytes that are not text
// reached the error line raw. Now every such byte is refused or escaped, and the line stays short.
TEST(Args, FuzzFindingsGiveOnePrintableLine)
{
    const std::string huge(10 * 1024 * 1024, 'w');
    const std::string long_path = "/tmp/" + std::string(5000, 'p');
    const std::vector<std::vector<const char *>> bad = {
        {"-\xfc"
         "h"},                                   // unknown flag, not ASCII
        {"st\x1b[2Jray"},                        // stray argument with an escape sequence
        {"-cm", "-sa", "10.77.0.1\x84\x84\x84"}, // -sa not ASCII
        {"-cm", "-sa", "10.77.0.1\r"},           // -sa with a carriage return
        {"-d", "rxe\n0"},                        // device name with a newline
        {"-d", "rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0x"}, // past IBV_SYSFS_NAME_MAX
        {"-ld", "/tmp/a\rb"},                                                        // path with a control byte
        {"-ld", long_path.c_str()},                                                  // path past PATH_MAX
        {"-w", huge.c_str()},                                                        // a 10 MB message
    };
    for (const auto &words : bad) {
        std::vector<const char *> argv{"prog"};
        argv.insert(argv.end(), words.begin(), words.end());
        try {
            parse_args(spec_with('w'), static_cast<int>(argv.size()), argv.data());
            ADD_FAILURE() << "accepted: " << words.back();
        } catch (const UsageError &e) {
            const std::string msg = e.what();
            EXPECT_LT(msg.size(), 300U) << msg.substr(0, 300);
            for (unsigned char c : msg)
                EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "raw byte " << int(c) << " in: " << msg.substr(0, 300);
        }
    }
    // A UTF-8 file name is still a file name.
    EXPECT_EQ(parse(spec_with('w'), {"-ld", "/tmp/donn\xc3\xa9"
                                            "es.desc"})
                  .local_descriptor_path,
              "/tmp/donn\xc3\xa9"
              "es.desc");
}

TEST(Args, AnRdmaCmOnlyProgramHasNoDescriptorFlagsAndTakesOneOperand)
{
    ProgramSpec s = spec_with(0);
    s.role = "sender";
    s.descriptor_files = false;
    std::string file;
    s.operand_name = "FILE";
    s.operand = [&](const std::string &v) { file = v; };
    std::string out;
    s.extra.push_back({"output", "PATH", "where", ".", [&](const std::string &v) { out = v; }, "o"});

    const Args a = parse(s, {"-sa", "10.0.0.1", "/tmp/f", "-o", "x"});
    EXPECT_TRUE(a.use_cm); // always on, without -cm
    EXPECT_EQ(file, "/tmp/f");
    EXPECT_EQ(out, "x");
    EXPECT_TRUE(parse(s, {"-cm", "-sa", "10.0.0.1", "f"}).use_cm); // -cm is accepted and changes nothing
    EXPECT_EQ(parse(s, {"-sa", "10.0.0.1", "--output", "y", "f"}).server_addr, "10.0.0.1");
    EXPECT_EQ(out, "y");

    EXPECT_THROW(parse(s, {"-sa", "10.0.0.1"}), UsageError);                   // FILE missing
    EXPECT_THROW(parse(s, {"-sa", "10.0.0.1", "a", "b"}), UsageError);         // two operands
    EXPECT_THROW(parse(s, {"-sa", "10.0.0.1", "-ld", "/x", "f"}), UsageError); // no descriptor files
    EXPECT_THROW(parse(s, {"f"}), UsageError);                                 // a sender needs -sa
    EXPECT_TRUE(parse(s, {"-h"}).help);                                        // --help needs no FILE

    const std::string help = usage(s);
    EXPECT_NE(help.find("Usage: prog [flags] FILE"), std::string::npos);
    EXPECT_NE(help.find("-o, --output PATH"), std::string::npos);
    EXPECT_EQ(help.find("--local-descriptor-path"), std::string::npos);
}
