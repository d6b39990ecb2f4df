/**
 * @file fuzz_args.cpp
 * @brief libFuzzer target: the command line parser.
 *
 * The input is an argv vector, its entries separated by NUL bytes (as /proc/PID/cmdline spells one).
 * It is parsed as three programs would parse it: a requester with -w and RDMA CM, a responder with -m,
 * and a multi-connection server with -nc and a program flag that takes a number. Each parse either
 * returns or throws UsageError with one short printable line, whatever the values are (a 10 MB -w
 * included).
 */
#include "fuzz_common.hpp"

#include <rdma_samples/args.hpp>

#include <cstdint>
#include <string>
#include <vector>

using namespace rdma_samples;

namespace {

std::vector<ProgramSpec> specs()
{
    ProgramSpec requester{.name = "rdma_write_requester",
                          .role = "requester",
                          .summary = "fuzz",
                          .message_flag = 'w',
                          .message_help = "what to write",
                          .rdma_cm = true};
    ProgramSpec responder{.name = "rdma_write_responder", .role = "responder", .summary = "fuzz", .rdma_cm = true};
    ProgramSpec server{.name = "rdma_multi_conn_receiver",
                       .role = "receiver",
                       .summary = "fuzz",
                       .message_flag = 's',
                       .message_help = "what to send",
                       .resource_descriptor = false,
                       .multi_conn = true,
                       .rdma_cm = true};
    server.extra.push_back(
        {"add", "N", "a number", "1", [](const std::string &v) { (void)parse_number("--add", v, 0, UINT64_MAX); }});
    server.extra.push_back({"try-write", "", "a switch", "", [](const std::string &) {}});
    return {requester, responder, server};
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    static const std::vector<ProgramSpec> programs = specs();
    std::vector<std::string> words{"program"};
    std::string word;
    for (std::size_t i = 0; i < size; ++i) {
        if (data[i] == 0) {
            words.push_back(word);
            word.clear();
        } else {
            word += static_cast<char>(data[i]);
        }
    }
    words.push_back(word);
    if (words.size() > 64)
        return 0; // a command line, not a stress test of std::vector
    std::vector<const char *> argv;
    for (const auto &w : words)
        argv.push_back(w.c_str());
    argv.push_back(nullptr);

    for (const auto &spec : programs) {
        try {
            const Args a = parse_args(spec, static_cast<int>(words.size()), argv.data());
            fuzz::require(a.message.size() <= max_message_length, "-s/-r/-w within the limit");
            fuzz::require(a.timeout_s >= 1, "-t at least 1");
            fuzz::require(a.num_connections >= 1 && a.num_connections <= 1024, "-nc within 1..1024");
        } catch (const UsageError &e) {
            fuzz::check_message(e.what(), spec.name.c_str());
        }
    }
    return 0;
}
