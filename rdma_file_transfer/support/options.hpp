/**
 * @file options.hpp
 * @brief rdma_file_transfer's own flags, besides the common ones (-lp, -sa, -sat, -d, -g, -t, -v):
 * what each program's main() fills in before the lesson runs, and the receiver's checks of them, together
 * and against the device (check_receiver_options(), check_ring_fits()).
 */
#pragma once

#include "../protocol.hpp"

#include <rdma_samples/args.hpp>
#include <rdma_samples/check.hpp>
#include <rdma_samples/text.hpp>

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rdma_file_transfer {

/** @brief --deadline's default: the longest a whole transfer may last, whatever the peer does. */
inline constexpr int default_deadline_s = 3600;

/** @brief The sender's flags. */
struct SenderOptions {
    std::string file;                    ///< FILE
    std::string id = "anonymous";        ///< --id
    std::string name;                    ///< --name (default: FILE's last component)
    int deadline_s = default_deadline_s; ///< --deadline
};

/** @brief The receiver's flags. */
struct ReceiverOptions {
    std::string out;                      ///< -o PATH|DIR (required: no silent default into the working directory)
    int deadline_s = default_deadline_s;  ///< --deadline
    std::optional<std::string> keys_file; ///< --keys (none: every ID gets a receipt)
    bool force = false;                   ///< --force
    std::uint32_t slots = 4;              ///< --slots
    std::uint32_t chunk = 1 << 20;        ///< --chunk
    std::uint64_t max_size = UINT64_MAX;  ///< --max-size (by default only the free space bounds an offer)
};

/** @brief --deadline, the same on both sides: seconds the whole transfer may last (-t bounds each wait).
 *  @param deadline_s where the value goes @return the flag */
inline rdma_samples::ExtraFlag deadline_flag(int &deadline_s)
{
    return rdma_samples::int_flag("deadline", "SECONDS",
                                  "the longest the whole transfer may last (-t bounds each wait in it)",
                                  std::to_string(default_deadline_s), deadline_s, 1, 7 * 24 * 3600);
}

/** @brief The sender's FILE operand and its --name, the same in the RDMA pair and its TCP twin: FILE
 *  also names the file unless --name does. @param spec where they go @param file,name where the values go
 *  (they must outlive the parse) */
inline void file_and_name(rdma_samples::ProgramSpec &spec, std::string &file, std::string &name)
{
    spec.operand_name = "FILE";
    spec.operand_help = "the file to send (a regular file)";
    spec.operand = [&file, &name](const std::string &v) {
        file = v;
        if (name.empty()) // (a --name given before FILE stays)
            name = v.substr(v.rfind('/') + 1);
    };
    spec.extra.push_back({"name", "NAME", "the name to store the file under, when the receiver's -o is a directory",
                          "FILE's last component", [&name](const std::string &v) {
                              if (v.size() >= max_text) // (the receiver judges the name itself: NAME_MAX, /, ..)
                                  throw rdma_samples::UsageError("--name: at most " + std::to_string(max_text - 1) +
                                                                 " bytes");
                              name = v;
                          }});
}

/** @brief The receiver's -o, --force and --max-size, the same in the RDMA pair and its TCP twin.
 *  @param out,force,max_size where the values go (they must outlive the parse) @return the flags */
inline std::vector<rdma_samples::ExtraFlag> output_flags(std::string &out, bool &force, std::uint64_t &max_size)
{
    return {
        {"output", "PATH|DIR", "where to store the file (required); a directory: under the name the sender gives",
         "none: required",
         [&out](const std::string &v) {
             if (v.empty())
                 throw rdma_samples::UsageError("-o: empty; give a directory or a file path");
             out = v;
         },
         "o"},
        {"force", "", "replace an existing file", "off", [&force](const std::string &) { force = true; }},
        {"max-size", "BYTES", "refuse an offer of more bytes (one larger than the free space is refused anyway)",
         "none: the free space",
         [&max_size](const std::string &v) { max_size = rdma_samples::parse_number("--max-size", v, 0, UINT64_MAX); }},
    };
}

/** @brief rdma_file_sender's command line, filling @p opt. @return the spec for run_sample() */
inline rdma_samples::ProgramSpec sender_spec(SenderOptions &opt)
{
    using rdma_samples::UsageError;
    rdma_samples::ProgramSpec spec = rdma_samples::cm_only_spec(
        "rdma_file_sender", "sender",
        "Send FILE to rdma_file_receiver over RDMA WRITEs into its ring, verified with SHA-256.");
    spec.extra = {
        {"id", "NAME", "who we are, for the receiver's --keys (step 6)", "anonymous",
         [&opt](const std::string &v) {
             if (v.empty() || v.size() > 255 || v.find_first_of(" \n\r\t") != std::string::npos)
                 throw UsageError("--id: 1 to 255 bytes without blanks, got " + rdma_samples::quote(v));
             opt.id = v;
         }},
    };
    file_and_name(spec, opt.file, opt.name);
    spec.extra.push_back(deadline_flag(opt.deadline_s));
    return spec;
}

/** @brief What the receiver's flags must say together, checked before anything is opened: -o given
 *  (a name that comes over the network never lands in whatever directory the receiver started in),
 *  and a ring of at most max_ring_bytes. Throws UsageError. @param opt the parsed flags */
inline void check_receiver_options(const ReceiverOptions &opt)
{
    if (opt.out.empty())
        throw rdma_samples::UsageError("-o is required: the directory (or file path) to store the received file in",
                                       "e.g. -o ~/incoming; a sender's name is used only inside a directory you chose");
    if (std::uint64_t{opt.slots} * opt.chunk > max_ring_bytes)
        throw rdma_samples::UsageError("--slots " + std::to_string(opt.slots) + " --chunk " +
                                           std::to_string(opt.chunk) + ": a ring of more than " +
                                           std::to_string(max_ring_bytes) + " bytes",
                                       "lower --slots or --chunk; the sender refuses a bigger ring too");
}

/** @brief A ring of @p slots x @p chunk bytes must fit the device: one memory region (max_mr_size),
 *  a receive queue and a send queue of the depths above (max_qp_wr), one CQ for both (max_cqe).
 *  Throws UsageError with the largest --slots that fits. */
inline void check_ring_fits(const ibv_device_attr &attr, const std::string &dev, std::uint32_t slots,
                            std::uint32_t chunk)
{
    const std::string ring = "--slots " + std::to_string(slots);
    if (std::uint64_t{slots} * chunk > attr.max_mr_size)
        throw rdma_samples::UsageError(ring + " --chunk " + std::to_string(chunk) + ": " + dev +
                                           " registers at most max_mr_size = " + std::to_string(attr.max_mr_size) +
                                           " bytes",
                                       "lower --chunk or --slots (see ibv_devinfo -v)");
    const std::uint64_t recv = receiver_recv_depth(slots), send = receiver_send_depth(slots);
    const std::int64_t fit =
        std::min<std::int64_t>(std::int64_t{attr.max_qp_wr} - 4, (std::int64_t{attr.max_cqe} - 6) / 2);
    const std::string hint = "use --slots " + std::to_string(fit) + " or fewer (see ibv_devinfo -v)";
    if (send > static_cast<std::uint64_t>(attr.max_qp_wr))
        throw rdma_samples::UsageError(ring + ": a credit per slot and 4 messages in the send queue exceed " + dev +
                                           "'s max_qp_wr = " + std::to_string(attr.max_qp_wr),
                                       hint);
    if (recv + send > static_cast<std::uint64_t>(attr.max_cqe))
        throw rdma_samples::UsageError(ring + ": " + std::to_string(recv + send) +
                                           " completions (receives and sends) exceed " + dev +
                                           "'s max_cqe = " + std::to_string(attr.max_cqe),
                                       hint);
}

/** @brief rdma_file_receiver's command line, filling @p opt. @return the spec for run_sample() */
inline rdma_samples::ProgramSpec receiver_spec(ReceiverOptions &opt)
{
    using rdma_samples::parse_number;
    rdma_samples::ProgramSpec spec = rdma_samples::cm_only_spec(
        "rdma_file_receiver", "receiver",
        "Receive one file from rdma_file_sender into a ring of slots, verify its SHA-256, keep it.");
    spec.extra = output_flags(opt.out, opt.force, opt.max_size);
    spec.extra.insert(spec.extra.begin() + 1,
                      {"keys", "FILE", "one \"ID KEY\" per line: the key to send each sender ID (step 7)",
                       "none: send a receipt", [&opt](const std::string &v) { opt.keys_file = v; }});
    spec.extra.insert(spec.extra.end(),
                      {
                          {"slots", "N", "slots in the ring: chunks the sender may have in flight", "4",
                           [&opt](const std::string &v) {
                               opt.slots = static_cast<std::uint32_t>(parse_number("--slots", v, 1, 1U << 24));
                           }},
                          {"chunk", "BYTES", "bytes per slot (one RDMA WRITE)", "1048576",
                           [&opt](const std::string &v) {
                               opt.chunk = static_cast<std::uint32_t>(parse_number("--chunk", v, 1, max_chunk));
                           }},
                          deadline_flag(opt.deadline_s),
                      });
    return spec;
}

} // namespace rdma_file_transfer
