/**
 * @file sender.cpp
 * @brief rdma_file_sender's TCP twin: the same file, the same checks and the same SHA-256, over one
 * TCP connection, so that the two can be measured side by side.
 *
 * The steps are the RDMA sender's, as far as TCP has them: connect; send the offer (length, name);
 * receive the answer (the chunk size); read, hash and send the file chunk after chunk; send "done" with
 * the digest; receive the verdict and check it against our own digest. What TCP does not need: a ring
 * in the receiver's memory and its rkey (the kernel's socket buffers hold the bytes in flight), credits
 * (TCP's receive window stops us when the receiver falls behind), an ID and a key. What it costs
 * instead: for every chunk, a pread() (the file into our buffer, as the RDMA sender does too), then
 * send() calls that copy the chunk into the kernel, where the RDMA sender posts one WRITE and the NIC
 * reads our buffer itself. See receiver.cpp, and ../sender.cpp for the RDMA side.
 */
#include "../support/files.hpp"
#include "../support/test_fault.hpp"
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

void run(const Args &args, const tcp::SenderOptions &opt)
{
    if (opt.server_addr.empty())
        throw UsageError("the sender connects to the receiver; give its address with -sa ADDR");
    step(1, "open %s: the file is hashed as it is sent, not before", quote(opt.file).c_str());
    Source src = open_source(opt.file);

    step(2, "connect to %s port %u (TCP: socket(), connect(); the kernel does the three-way handshake)",
         opt.server_addr.c_str(), opt.port);
    Stream s{.fd = connect_to(opt.server_addr, opt.port, args.timeout_s),
             .timeout_s = args.timeout_s,
             .transfer = Deadline(opt.deadline_s),
             .peer = "the receiver"};
    info("connected to %s", peer_name(s.fd.get()).c_str());

    step(3, "send the offer: %llu bytes, the name %s (protocol version %u)", static_cast<unsigned long long>(src.size),
         quote(opt.name).c_str(), tcp::version);
    Message offer = make_message(Type::offer, opt.name);
    offer.length = src.size;
    s.send_message(offer);

    step(4, "receive the receiver's answer: the chunk size");
    const Message accept = s.recv_message(Type::accept, "the receiver's answer to our offer");
    s.refuse_on_error([&] { check_accept(accept); });
    // One buffer of a chunk, never more than the file: the kernel's socket buffer holds what is in flight.
    std::vector<char> chunk(std::max<std::uint64_t>(std::min<std::uint64_t>(accept.chunk, src.size), 1));
    info("chunks of %u bytes; a buffer of %zu bytes", accept.chunk, chunk.size());

    step(5, "read, hash and send the file chunk after chunk (pread(), then send() copies it into the kernel)");
    Progress progress(src.size, "sent");
    Sha256 sha; // one pass: the bytes as they leave
    std::uint64_t offset = 0;
    for (std::uint64_t k = 0; offset < src.size; ++k) {
        const std::size_t want = std::min<std::uint64_t>(chunk.size(), src.size - offset);
        const std::size_t len = read_at(src.fd.get(), chunk.data(), want, offset); // the file into our buffer
        if (len != want)
            throw *changed_while_sent(src, offset + len, opt.file); // shrank: we close, the receiver sees it
        sha.update(chunk.data(), len);
        if (k == 0 && test_fault().corrupt)
            chunk[0] = static_cast<char>(chunk[0] ^ 1);     // test only: damage the data after hashing it
        s.send_data(chunk.data(), len, "the file's bytes"); // our buffer into the kernel's: TCP takes it from there
        offset += len;
        progress.update(offset);
        test_sleep(test_fault().pause_ms);
    }
    if (const std::optional<Error> changed = changed_while_sent(src, offset, opt.file))
        s.refuse(*changed);
    const Digest digest = sha.final();
    Message done = make_message(Type::done);
    done.length = offset;
    done.digest = digest;
    s.send_message(done); // TCP delivers it after every byte before it
    progress.finish();
    result("%s  %s", hex(digest).c_str(), opt.file.c_str()); // sha256sum's format

    step(6, "receive the verdict, and compare the digest the receiver computed with ours");
    const Message verdict = s.recv_message(Type::verdict, "the verdict");
    check_tcp_verdict(verdict, digest); // never success on the receiver's word alone
    result("Receiver's digest matches ours: %s", hex(verdict.digest).c_str());

    // The file is delivered and verified: a connection that ends badly now changes neither.
    after_result("the receiver verified the file", [&] {
        step(7, "close the connection: shutdown() sends our FIN; the receiver closes its end");
        s.finish("the receiver to close the connection");
    });
} // the socket and the file are closed here

} // namespace

int main(int argc, char **argv)
{
    tcp::SenderOptions opt;
    return run_sample(tcp::sender_spec(opt), argc, argv, [&](const Args &args) { run(args, opt); });
}
