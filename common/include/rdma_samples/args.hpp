/**
 * @file args.hpp
 * @brief The command line shared by every sample: DOCA's flags, plus -t and -v.
 *
 * DOCA users can keep their habits: `-d`, `-g`, `-ld`, `-re`, `-m`, `-cm`, `-lp`, `-sa`, `-sat`,
 * `-s`/`-r`/`-w`, `-nc` mean what they mean in the DOCA RDMA samples. Each program accepts only the
 * flags that make sense for it (the read requester takes `-r`, not `-w`). A bad flag or value ends the
 * program with exit status 2 and one line that says what is wrong.
 */
#pragma once

#include <rdma_samples/cm_address.hpp>

#include <cstdint>
#include <functional>
#include <utility>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace rdma_samples {

/** @brief DOCA's default path of the connection descriptor this side writes. */
inline constexpr const char *default_local_descriptor_path = "/tmp/local_connection_desc_path.txt";
/** @brief DOCA's default path of the connection descriptor this side reads. */
inline constexpr const char *default_remote_descriptor_path = "/tmp/remote_connection_desc_path.txt";
/** @brief DOCA's default path of the mmap or sync-event descriptor. */
inline constexpr const char *default_resource_descriptor_path = "/tmp/remote_resource_desc_path.txt";
/** @brief The default message (`-s`, `-r`, `-w`). */
inline constexpr const char *default_message = "Hi RDMA!";
/** @brief The longest message a sample moves, in bytes (DOCA's limit). */
inline constexpr std::size_t max_message_length = 256;
/** @brief Everything the command line can set. Fields a program does not accept keep their default. */
struct Args {
    std::string device;           ///< -d: RDMA device name; empty = first with an active port
    std::optional<int> gid_index; ///< -g: GID index; empty = best GID (see device.hpp)
    std::string local_descriptor_path = default_local_descriptor_path;       ///< -ld
    std::string remote_descriptor_path = default_remote_descriptor_path;     ///< -re
    std::string resource_descriptor_path = default_resource_descriptor_path; ///< -m
    bool use_cm = false;                         ///< -cm: connect with librdmacm instead of files
    std::uint16_t listen_port = default_cm_port; ///< -lp
    std::optional<std::string> server_addr;      ///< -sa: given = RDMA CM client
    AddrType server_addr_type = AddrType::ipv4;  ///< -sat
    std::string message = default_message;       ///< -s, -r or -w, whichever the program takes
    int num_connections = 1;                     ///< -nc (multi_conn only)
    int timeout_s = 30;                          ///< -t: seconds any single wait may last
    bool verbose = false;                        ///< -v: trace every verbs call
    bool help = false;                           ///< -h: print the usage and exit 0

    /** @brief Where an RDMA CM client connects: `-sa` (read as `-sat` says) and `-lp`.
     *  @return the server's address; empty when no `-sa` was given */
    CmServerAddr cm_server() const { return {server_addr.value_or(""), server_addr_type, listen_port}; }
};

/** @brief A flag that only one program has (a demonstration switch, an atomic operand...). */
struct ExtraFlag {
    std::string long_name{};    ///< without the dashes, e.g. "op"
    std::string value_name{};   ///< e.g. "N"; empty for a switch that takes no value
    std::string help{};         ///< one line for --help
    std::string default_text{}; ///< shown in --help as "(default: ...)"; may be empty
    /** Called with the value (or "" for a switch); throws UsageError on a bad value. */
    std::function<void(const std::string &)> apply{};
    std::string short_name{}; ///< without the dash, e.g. "o"; empty: the long name only
};

/** @brief Which flags a program takes, and how it describes itself in --help. */
struct ProgramSpec {
    std::string name{};              ///< installed name, e.g. "rdma_write_requester"
    std::string role{};              ///< prefix of error lines, e.g. "requester"
    std::string summary{};           ///< one line for --help
    char message_flag = 0;           ///< 's', 'r' or 'w' (0: no message flag)
    std::string message_help{};      ///< help text of the message flag
    bool resource_descriptor = true; ///< whether -m applies
    bool multi_conn = false;         ///< whether -nc applies
    /// whether -d and -g apply, and -v traces verbs calls; false: a program without RDMA (rdma_file_transfer's
    /// TCP twin, which -v traces socket calls)
    bool rdma_device = true;
    bool rdma_cm = false; ///< whether -cm, -lp, -sa, -sat apply
    /// whether -ld, -re and -cm apply; false: an RDMA CM program only (use_cm is always set)
    bool descriptor_files = true;
    std::vector<ExtraFlag> extra{}; ///< program-specific flags
    /// the one argument that is not a flag, e.g. "FILE" (empty: the program takes none)
    std::string operand_name{};
    /// one line for --help about the operand
    std::string operand_help{};
    /// called with the operand; throws UsageError on a bad one. The operand is required when set.
    std::function<void(const std::string &)> operand{};
};

/**
 * @brief The spec of a program that connects with RDMA CM only: no descriptor files, no resource
 * descriptor (rdma_file_transfer, rdma_event_loop).
 * @param name,role,summary as in ProgramSpec
 * @return the spec, without the program's own flags yet
 */
inline ProgramSpec cm_only_spec(const char *name, const char *role, const char *summary)
{
    return {.name = name,
            .role = role,
            .summary = summary,
            .resource_descriptor = false,
            .rdma_cm = true,
            .descriptor_files = false};
}

/**
 * @brief A bad command line; main() prints it as one line (and its hint, if any) and exits 2.
 *
 * The rule for what the device refuses: a flag's value beyond one of its limits (an SRQ deeper than
 * max_srq_wr, a ring past max_qp_wr, a size over max_mr_size) is a UsageError too, thrown once the
 * device is open, with the limit in the hint: another value works. A device without what the program
 * needs at all (atomics, UD, SRQs, memory windows, ODP) is an Error, exit 1: no flag fixes that.
 */
class UsageError : public std::runtime_error {
public:
    /** @param what one line: the flag, its value and what is wrong @param hint what to pass instead, or empty */
    explicit UsageError(const std::string &what, std::string hint = {})
        : std::runtime_error(what), hint_(std::move(hint))
    {}
    /** @brief What to pass instead. @return the hint, or empty */
    const std::string &hint() const { return hint_; }

private:
    std::string hint_;
};

/**
 * @brief Parse the command line.
 * @param spec which flags the program accepts
 * @param argc,argv as given to main()
 * @return the parsed arguments; `help` is set when -h was given
 * @throws UsageError with a one-line reason for an unknown flag, a missing or bad value
 */
Args parse_args(const ProgramSpec &spec, int argc, const char *const *argv);

/**
 * @brief The --help text: every flag the program takes, with its default.
 * @param spec the program's flags
 * @return the text, several lines
 */
std::string usage(const ProgramSpec &spec);

/**
 * @brief Parse an unsigned integer (decimal, or hex with 0x) within [lo, hi].
 * @param flag  the flag name, for the message
 * @param text  the value as typed
 * @param lo,hi the accepted range
 * @return the value
 * @throws UsageError naming the flag, the value and the range
 */
std::uint64_t parse_number(const std::string &flag, const std::string &text, std::uint64_t lo, std::uint64_t hi);

/**
 * @brief A program's flag whose value is a whole number within [@p lo, @p hi] (parse_number()).
 * @param name its long name, without the dashes @param value_name e.g. "N" or "MS", for --help
 * @param help,default_text for --help @param target where the value goes (it must outlive the parse)
 * @param lo,hi the accepted range (within int's) @return the flag
 */
inline ExtraFlag int_flag(const char *name, const char *value_name, std::string help, std::string default_text,
                          int &target, std::uint64_t lo, std::uint64_t hi)
{
    return {name, value_name, std::move(help), std::move(default_text), [name, &target, lo, hi](const std::string &v) {
                target = static_cast<int>(parse_number(std::string("--") + name, v, lo, hi));
            }};
}

} // namespace rdma_samples
