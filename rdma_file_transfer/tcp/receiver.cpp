/**
 * @file receiver.cpp
 * @brief rdma_file_receiver's TCP twin: listen, take the offer, read the file chunk after chunk, hash
 * and write each chunk, verify the SHA-256 the sender sends with "done", keep the file only if it
 * matches.
 *
 * The checks are the RDMA receiver's: every message's magic, version, type and text; the name, the
 * destination and the free space before a byte is written; the length the offer announced, neither a
 * byte more nor less. What TCP spares us: no ring to register and export, no slot to copy out of the
 * sender's reach (nobody but the kernel writes into our buffer, and only when we call recv()), no
 * credits (the kernel's receive window holds the sender back). What it costs instead: every byte is
 * copied by the kernel out of the socket's buffer into ours, in recv() calls, where the RDMA receiver's
 * NIC wrote it into the ring without the CPU. Memory is one chunk (--chunk), whatever the file's size.
 * See sender.cpp, and ../receiver.cpp for the RDMA side.
 */
#include "../support/destination.hpp"
#include "../support/files.hpp"
#include "../support/part_file.hpp"
#include "connect.hpp"
#include "options.hpp"
#include "stream.hpp"

#include <rdma_samples/log.hpp>
#include <rdma_samples/run_sample.hpp>

#include <vector>

using namespace rdma_samples;
using namespace rdma_file_transfer;
using namespace rdma_file_transfer::tcp;

namespace {

void run(const Args &args, const tcp::ReceiverOptions &opt)
{
    if (opt.out.empty())
        throw UsageError("-o is required: the directory (or file path) to store the received file in",
                         "e.g. -o ~/incoming; a sender's name is used only inside a directory you chose");
    step(1, "listen on TCP port %u (socket(), bind(), listen())", opt.port);
    Fd listener = listen_on(opt.port);
    info("listening on port %u; waiting up to %d s for the sender", opt.port, args.timeout_s);

    step(2, "accept the sender: poll() until the kernel has finished the handshake, then accept()");
    Stream s{.fd = accept_one(listener.get(), args.timeout_s),
             .timeout_s = args.timeout_s,
             .transfer = Deadline(opt.deadline_s),
             .peer = "the sender"};
    listener.reset(); // one sender at a time: another one's connect() is refused from now on
    info("connected to %s", peer_name(s.fd.get()).c_str());

    step(3, "receive the offer, check the name and the destination, answer with the chunk size");
    const Message offer = s.refuse_on_error([&] { return s.recv_message(Type::offer, "the sender's offer"); });
    const Destination dest = s.refuse_on_error([&] { return destination(opt.out, offer.text); }); // the name checked
    PartFile file = s.refuse_on_error([&] { return PartFile(dest, opt.force); }); // the directory opened once
    s.refuse_on_error([&] { file.check_room(offer.length, opt.max_size); });      // --max-size, the free space
    info("offer: %s, %llu bytes; writing %s", quote(offer.text).c_str(), static_cast<unsigned long long>(offer.length),
         quote(dest.path()).c_str());
    Message accept = make_message(Type::accept);
    accept.chunk = opt.chunk;
    s.send_message(accept);

    step(4, "for each chunk: recv() it (the kernel copies it out of the socket), hash it, write it");
    Progress progress(offer.length, "received");
    Sha256 sha;
    // One chunk, never more than the file: the offer's length bounds nothing we allocate beyond --chunk.
    std::vector<char> chunk(std::min<std::uint64_t>(opt.chunk, std::max<std::uint64_t>(offer.length, 1)));
    const Message done = s.refuse_on_error([&] {
        for (std::uint64_t received = 0; received < offer.length;) {
            // Exactly the offer's length, in chunks: recv() returns what the socket holds, so a chunk
            // may take several calls, and each one that finds the socket empty sleeps in poll() (-t).
            const std::size_t want = std::min<std::uint64_t>(chunk.size(), offer.length - received);
            for (std::size_t got = 0; got < want;) {
                const std::size_t n = s.recv_some(chunk.data() + got, want - got, "the file's bytes");
                if (n == 0)
                    throw s.closed_error("the file", received + got, offer.length);
                got += n;
            }
            sha.update(chunk.data(), want); // the bytes hashed are the bytes written
            file.write(chunk.data(), want);
            received += want;
            progress.update(received);
        }
        const Message m = s.recv_message(Type::done, "\"done\" after the file's bytes");
        check_done(m, offer.length);
        return m;
    }); // disk full, a lie, the sender's own refusal: the sender hears why (its refusal comes back, changing nothing)
    progress.finish();

    step(5, "compare the digests; keep the file (fsync, then its name) only if they match; send the verdict");
    Message verdict = make_message(Type::verdict);
    verdict.digest = sha.final();
    verdict.flags = verdict.digest == done.digest ? 1 : 0;
    if (verdict.flags != 1) {
        s.send_message(verdict);
        throw digest_mismatch(verdict.digest, done.digest);
    }
    s.refuse_on_error([&] { file.commit(); });
    result("%s  %s", hex(verdict.digest).c_str(), shown_path(dest.path()).c_str()); // sha256sum's format
    // From here the file is kept: what fails afterwards does not undo it, and ends as a warning.
    after_result("the file was verified and kept as " + shown_path(dest.path()), [&] {
        s.send_message(verdict);
        step(6, "wait for the sender to close the connection, then close ours");
        s.finish("the sender to close the connection");
    });
} // the socket, the file (removed unless committed) are closed here

} // namespace

int main(int argc, char **argv)
{
    tcp::ReceiverOptions opt;
    return run_sample(tcp::receiver_spec(opt), argc, argv, [&](const Args &args) { run(args, opt); });
}
