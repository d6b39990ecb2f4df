/** @file check.cpp @brief Errors with hints: the one table of advice for errno values and completions. */
#include <rdma_samples/check.hpp>
#include <rdma_samples/log.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace rdma_samples {

namespace {

/** One row of the hint table: a call (prefix match, "" = any call) and an errno value. */
struct ErrnoHint {
    std::string_view call;
    int err;
    std::string_view hint;
};

constexpr ErrnoHint errno_hints[] = {
    {"ibv_reg_mr", ENOMEM,
     "this region would take the pages this process has pinned past its locked-memory limit (registration "
     "pins its pages, and the limit counts them all); raise it (`ulimit -l`, or memlock in "
     "/etc/security/limits.conf) or run with CAP_IPC_LOCK (root)"},
    // A limit of 0 is refused before any page is counted: ib_umem_get() asks can_do_mlock() first.
    {"ibv_reg_mr", EPERM,
     "this process may lock no memory at all (its locked-memory limit is 0, and it lacks CAP_IPC_LOCK), and "
     "registration pins pages; raise the limit (`ulimit -l`, or memlock in /etc/security/limits.conf)"},
    {"ibv_reg_mr", EINVAL,
     "the access flags are not allowed together (remote write needs local write) or the buffer is invalid"},
    {"ibv_reg_mr", EOPNOTSUPP,
     "the device does not support one of the access flags asked for (remote atomic?); see ibv_devinfo -v"},
    {"ibv_reg_mr", EACCES, "the buffer's page protection does not allow the access asked for"},
    {"ibv_modify_qp(RTR)", ENETUNREACH,
     "the GID has no route to the peer (a link-local fe80:: GID on a loopback device?); choose an IPv4-mapped RoCE v2 GID with -g (see ibv_devinfo -v)"},
    {"ibv_modify_qp(RTR)", EINVAL,
     "an attribute does not fit the device or the peer: check the peer's descriptor (QPN, GID, MTU) and the -g index on both sides"},
    {"ibv_modify_qp(RTR)", ETIMEDOUT,
     "the peer's address could not be resolved to a MAC address; check that the peer's IP is reachable (ping) from the device's network interface"},
    {"ibv_create_ah", ETIMEDOUT,
     "no MAC address for that GID: nobody on the device's network answered ARP (or neighbour discovery) for it; check the GID in the peer's descriptor and that the peer's IP is reachable (ping)"},
    {"ibv_create_ah", ENETUNREACH,
     "no route from the device's interface to that GID; check the GID in the peer's descriptor"},
    {"ibv_create_ah", EINVAL,
     "that GID cannot be reached from our GID (an fe80:: link-local or IPv6 GID against an IPv4-mapped one?); the peer's GID and our -g must be of the same kind"},
    {"ibv_modify_qp", EINVAL,
     "an attribute is out of the device's range or the QP is not in the state this transition starts from"},
    {"ibv_create_qp", EINVAL, "a queue size exceeds the device's limits (see max_qp_wr, max_sge in ibv_devinfo -v)"},
    {"ibv_create_qp", ENOMEM, "out of memory or out of QPs on this device"},
    {"ibv_create_cq", EINVAL, "the CQ size exceeds the device's max_cqe (see ibv_devinfo -v)"},
    {"ibv_open_device", EACCES,
     "no permission to open /dev/infiniband/uverbs*; run as root or add your user to the group that owns it (often 'rdma')"},
    {"ibv_open_device", EPERM,
     "no permission to open /dev/infiniband/uverbs*; run as root or add your user to the group that owns it (often 'rdma')"},
    {"ibv_alloc_pd", EACCES, "no permission to use the device; run as root or join its group (often 'rdma')"},
    {"ibv_post_send", ENOMEM, "the send queue is full: poll completions before posting more"},
    {"ibv_post_send", EINVAL, "the work request is malformed for this QP (opcode, SGE count, or the QP is not in RTS)"},
    {"ibv_post_recv", ENOMEM, "the receive queue is full"},
    {"ibv_post_recv", EINVAL, "the receive work request is malformed, or the QP is in RESET"},
    {"ibv_query_gid", EINVAL, "that GID index does not exist on this port; list the table with ibv_devinfo -v"},
    {"open", ENOENT, "the folder does not exist; create it or choose another path"},
    {"open", EACCES, "no permission to write there; choose another path (-ld, -m) or fix the folder's permissions"},
    {"rename", EACCES, "no permission to write there; choose another path (-ld, -m) or fix the folder's permissions"},
    {"", EACCES, "permission denied: run as root, or check the permissions of /dev/infiniband/*"},
    {"", EPERM, "operation not permitted: run as root, or check the permissions of /dev/infiniband/*"},
    {"", ENOMEM, "out of memory, or the locked-memory limit (`ulimit -l`) is too low"},
    {"", ENODEV, "the device went away; check `rdma link show`"},
};

/** One row of the completion table. */
struct WcInfo {
    ibv_wc_status status;
    std::string_view name;
    std::string_view hint;
};

constexpr WcInfo wc_table[] = {
    {IBV_WC_SUCCESS, "IBV_WC_SUCCESS", "no error"},
    {IBV_WC_LOC_LEN_ERR, "IBV_WC_LOC_LEN_ERR",
     "a message was longer than the receive buffer posted for it (receiver side; mlx5 reports it this way), or a local length was invalid; make the receive buffer as large as the largest message"},
    {IBV_WC_LOC_QP_OP_ERR, "IBV_WC_LOC_QP_OP_ERR",
     "the work request does not fit the QP (opcode, state or size); on a receive, Soft-RoCE (and qib) report a message longer than the receive buffer this way (mlx5 says IBV_WC_LOC_LEN_ERR): make the receive buffer as large as the largest message"},
    {IBV_WC_LOC_EEC_OP_ERR, "IBV_WC_LOC_EEC_OP_ERR", "an internal EE context error"},
    {IBV_WC_LOC_PROT_ERR, "IBV_WC_LOC_PROT_ERR",
     "a local buffer is outside its memory region or the region lacks local write (lkey, address, length)"},
    {IBV_WC_WR_FLUSH_ERR, "IBV_WC_WR_FLUSH_ERR",
     "this request was flushed because the QP went to the error state; an earlier completion holds the real cause"},
    {IBV_WC_MW_BIND_ERR, "IBV_WC_MW_BIND_ERR", "a memory window bind failed"},
    {IBV_WC_BAD_RESP_ERR, "IBV_WC_BAD_RESP_ERR", "the peer answered with an unexpected response"},
    {IBV_WC_LOC_ACCESS_ERR, "IBV_WC_LOC_ACCESS_ERR",
     "a local protection error on incoming data; the local region lacks the needed access"},
    {IBV_WC_REM_INV_REQ_ERR, "IBV_WC_REM_INV_REQ_ERR",
     "the peer rejected the request as invalid: its QP does not grant this operation (remote write, read or atomic missing from its QP access flags), or a message was longer than its receive buffer"},
    {IBV_WC_REM_ACCESS_ERR, "IBV_WC_REM_ACCESS_ERR",
     "the peer refused access: check the rkey, that address and length lie inside the exported range, and that the peer granted this operation's remote permission (write, read or atomic) on its memory and QP"},
    {IBV_WC_REM_OP_ERR, "IBV_WC_REM_OP_ERR",
     "the peer could not complete the operation; Soft-RoCE reports a SEND longer than the peer's receive buffer this way (IBTA devices say IBV_WC_REM_INV_REQ_ERR): make the peer's receive buffer as large as the largest message"},
    {IBV_WC_RETRY_EXC_ERR, "IBV_WC_RETRY_EXC_ERR",
     "the peer never acknowledged: it is gone or not ready, or the QPN/GID in its descriptor is wrong (a stale descriptor file?)"},
    {IBV_WC_RNR_RETRY_EXC_ERR, "IBV_WC_RNR_RETRY_EXC_ERR",
     "the peer had no receive posted (Receiver Not Ready): the receiving side must post its receive before the sender sends"},
    {IBV_WC_LOC_RDD_VIOL_ERR, "IBV_WC_LOC_RDD_VIOL_ERR", "an RD domain violation"},
    {IBV_WC_REM_INV_RD_REQ_ERR, "IBV_WC_REM_INV_RD_REQ_ERR", "the peer rejected an RD request"},
    {IBV_WC_REM_ABORT_ERR, "IBV_WC_REM_ABORT_ERR", "the peer aborted the operation"},
    {IBV_WC_INV_EECN_ERR, "IBV_WC_INV_EECN_ERR", "an invalid EE context number"},
    {IBV_WC_INV_EEC_STATE_ERR, "IBV_WC_INV_EEC_STATE_ERR", "an invalid EE context state"},
    {IBV_WC_FATAL_ERR, "IBV_WC_FATAL_ERR", "the device reported a fatal error; check dmesg"},
    {IBV_WC_RESP_TIMEOUT_ERR, "IBV_WC_RESP_TIMEOUT_ERR", "the peer did not respond in time"},
    {IBV_WC_GENERAL_ERR, "IBV_WC_GENERAL_ERR", "a general error; check dmesg and the peer's output"},
};

} // namespace

std::string memlock_limit()
{
    rlimit lim{};
    if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0)
        return "RLIMIT_MEMLOCK: unknown";
    auto kib = [](rlim_t v) {
        return v == RLIM_INFINITY ? std::string("unlimited") : std::to_string(v / 1024) + " KiB";
    };
    return "RLIMIT_MEMLOCK here: " + kib(lim.rlim_cur) + " (hard limit " + kib(lim.rlim_max) + ")";
}

std::string hint_for_errno(const std::string &call, int err)
{
    for (const auto &row : errno_hints) {
        if (row.err == err && std::string_view(call).substr(0, row.call.size()) == row.call)
            // ENOMEM or EPERM from a registration: say what the limit is, so the reader knows what to raise.
            return std::string(row.hint) +
                   ((err == ENOMEM || err == EPERM) && call.starts_with("ibv_reg_mr") ? "; " + memlock_limit() : "");
    }
    return "see the man page of " + call.substr(0, call.find('(')) + " for what this error means here";
}

std::string hint_for_wc_status(ibv_wc_status status)
{
    for (const auto &row : wc_table)
        if (row.status == status)
            return std::string(row.hint);
    return "an unknown completion status; check the peer's output";
}

const char *wc_status_name(ibv_wc_status status)
{
    for (const auto &row : wc_table)
        if (row.status == status)
            return row.name.data();
    return "IBV_WC_(unknown)";
}

const char *wc_opcode_name(ibv_wc_opcode opcode)
{
    switch (opcode) {
    case IBV_WC_SEND: return "IBV_WC_SEND";
    case IBV_WC_RDMA_WRITE: return "IBV_WC_RDMA_WRITE";
    case IBV_WC_RDMA_READ: return "IBV_WC_RDMA_READ";
    case IBV_WC_COMP_SWAP: return "IBV_WC_COMP_SWAP";
    case IBV_WC_FETCH_ADD: return "IBV_WC_FETCH_ADD";
    case IBV_WC_RECV: return "IBV_WC_RECV";
    case IBV_WC_RECV_RDMA_WITH_IMM: return "IBV_WC_RECV_RDMA_WITH_IMM";
    default: return "IBV_WC_(other)";
    }
}

const char *qp_state_name(ibv_qp_state state)
{
    switch (state) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_SQD: return "SQD";
    case IBV_QPS_SQE: return "SQE";
    case IBV_QPS_ERR: return "ERR";
    case IBV_QPS_UNKNOWN: break;
    }
    return "unknown";
}

void fail_errno(const std::string &call, int err, const std::string &hint)
{
    trace("%s failed: %s (errno %d)", call.c_str(), std::strerror(err), err);
    throw Error(call + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")", hint);
}

void fail_errno(const std::string &call, int err)
{
    fail_errno(call, err, hint_for_errno(call, err));
}

namespace detail {
void trace_pointer(const std::string &call, const void *ptr)
{
    trace("%s = %p", call.c_str(), ptr);
}
} // namespace detail

// The error an int-returning call reports: the verbs return an errno value, librdmacm (and
// ibv_rereg_mr(), with codes of its own) a negative value and errno set.
static int errno_of(int rc)
{
    if (rc > 0)
        return rc;
    return errno != 0 ? errno : EINVAL;
}

// A post returns the errno itself, never -1 with errno set; libsiw returns it negated.
static int post_errno(int rc)
{
    return rc > 0 ? rc : -rc;
}

// The one ending of check_rc() and check_post(): nothing for 0, else the error for @p err, with the
// caller's hint or the table's.
static void report(int rc, const std::string &call, int err, const std::function<std::string(int)> *hint)
{
    if (rc == 0) {
        trace("%s = 0", call.c_str());
        return;
    }
    if (hint != nullptr)
        fail_errno(call, err, (*hint)(err));
    else
        fail_errno(call, err);
}

void check_post(int rc, const std::string &call)
{
    report(rc, call, post_errno(rc), nullptr);
}

void check_post(int rc, const std::string &call, const std::function<std::string(int)> &hint)
{
    report(rc, call, post_errno(rc), &hint);
}

void check_rc(int rc, const std::string &call)
{
    report(rc, call, rc == 0 ? 0 : errno_of(rc), nullptr);
}

void check_rc(int rc, const std::string &call, const std::function<std::string(int)> &hint)
{
    report(rc, call, rc == 0 ? 0 : errno_of(rc), &hint);
}

int check_poll(int n)
{
    if (n < 0)
        fail_errno("ibv_poll_cq", errno != 0 ? errno : EIO);
    return n;
}

void check_wc(const ibv_wc &wc, ibv_wc_opcode expected, const std::string &what)
{
    if (wc.status != IBV_WC_SUCCESS) {
        // After an error only status, wr_id, qp_num and vendor_err are valid: do not read the opcode.
        char vendor[32];
        std::snprintf(vendor, sizeof vendor, " (vendor_err 0x%x)", wc.vendor_err);
        throw Error(what + " completed with " + wc_status_name(wc.status) + ": " + ibv_wc_status_str(wc.status) +
                        vendor,
                    hint_for_wc_status(wc.status));
    }
    if (wc.opcode != expected)
        throw Error(what + ": expected a completion with opcode " + wc_opcode_name(expected) + ", got " +
                        wc_opcode_name(wc.opcode),
                    "the peer posted a different operation than this sample expects; are both sides the same sample?");
    trace("completion: %s, status IBV_WC_SUCCESS, byte_len %u", wc_opcode_name(wc.opcode), wc.byte_len);
}

} // namespace rdma_samples
