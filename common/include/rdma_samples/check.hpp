/**
 * @file check.hpp
 * @brief Turn a failed verbs call or completion into an error that says what, why and what to check.
 *
 * Samples call check() on pointer-returning verbs, check_rc() on int-returning ones and check_wc() on
 * completions. Each throws rdma_samples::Error; only main() (see run_sample()) catches it and prints
 *
 *     requester: step 4 failed: ibv_modify_qp(RTR): Network is unreachable (errno 101)
 *     hint: the GID is link-local or has no route; try another -g (see ibv_devinfo -v)
 *
 * The hints live in one table, in check.cpp. Quoting outside text and parsing numbers is text.hpp;
 * the device's asynchronous events, which explain errors no completion reports, are async_events.hpp.
 */
#pragma once

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace rdma_samples {

/** @brief An error with a one-line description and a hint of what to check. */
class Error : public std::runtime_error {
public:
    /**
     * @param what one line: the call or action that failed and why
     * @param hint one line: what the user should check or try (may be empty)
     */
    Error(const std::string &what, std::string hint) : std::runtime_error(what), hint_(std::move(hint)) {}
    /** @brief What to check or try next.
     *  @return the hint, or an empty string */
    const std::string &hint() const { return hint_; }

private:
    std::string hint_;
};

/**
 * @brief The hint for a failed call, from the one table.
 * @param call the verbs or system call, e.g. "ibv_reg_mr" or "ibv_modify_qp(RTR)"
 * @param err  the errno value it failed with
 * @return one line of advice, never empty
 */
std::string hint_for_errno(const std::string &call, int err);

/**
 * @brief The locked-memory limit of this process, for the hint of a registration that failed with ENOMEM.
 * @return e.g. "RLIMIT_MEMLOCK here: 8192 KiB (hard limit 8192 KiB)"
 */
std::string memlock_limit();

/**
 * @brief The hint for a completion status, from the one table.
 * @param status a work completion status other than IBV_WC_SUCCESS
 * @return one line of advice, never empty
 */
std::string hint_for_wc_status(ibv_wc_status status);

/**
 * @brief The enum name of a completion status, e.g. "IBV_WC_REM_ACCESS_ERR".
 * @param status the status
 * @return its name
 */
const char *wc_status_name(ibv_wc_status status);

/**
 * @brief The enum name of a completion opcode, e.g. "IBV_WC_RDMA_WRITE".
 * @param opcode the opcode
 * @return its name
 */
const char *wc_opcode_name(ibv_wc_opcode opcode);

/**
 * @brief The name of a QP state, as ibv_query_qp() reports it, e.g. "ERR".
 * @param state the state
 * @return its name
 */
const char *qp_state_name(ibv_qp_state state);

/**
 * @brief Throw an Error for @p call failing with @p err, with the errno text and its hint.
 * @param call description of the call, including the arguments that matter
 * @param err  errno value
 */
[[noreturn]] void fail_errno(const std::string &call, int err);

/**
 * @brief As fail_errno(), with the hint given instead of the table's (a call whose advice depends on
 * what the caller knows, e.g. the port it tried to bind).
 * @param call description of the call
 * @param err  errno value
 * @param hint what to check
 */
[[noreturn]] void fail_errno(const std::string &call, int err, const std::string &hint);

namespace detail {
/**
 * @brief With -v, print a successful pointer-returning call and its result.
 * @param call the call
 * @param ptr  what it returned
 */
void trace_pointer(const std::string &call, const void *ptr);
} // namespace detail

/**
 * @brief Check a pointer returned by a verbs call (NULL means failure, errno holds the reason).
 * @param ptr  what the call returned
 * @param call description of the call, e.g. "ibv_alloc_pd"
 * @return @p ptr, when it is not NULL
 */
template <typename T>
T *check(T *ptr, const std::string &call)
{
    if (ptr == nullptr)
        fail_errno(call, errno != 0 ? errno : EINVAL);
    detail::trace_pointer(call, ptr);
    return ptr;
}

/**
 * @brief Check an int returned by a verbs or librdmacm call. Verbs return 0 on success and an errno
 * value on failure; librdmacm returns -1 and sets errno, and ibv_rereg_mr() a negative code of its own
 * (IBV_REREG_MR_ERR_*) with errno set: a positive @p rc is the errno, a negative one means "see errno".
 * @param rc   what the call returned
 * @param call description of the call
 */
void check_rc(int rc, const std::string &call);

/**
 * @brief Check what ibv_post_send(), ibv_post_recv() or ibv_post_srq_recv() returned: 0, or an errno
 * value, which some providers return negated (Soft-iWARP's libsiw returns -EINVAL, -ENOMEM...).
 * @param rc   what the post returned
 * @param call description of the post, e.g. "ibv_post_send(RDMA WRITE)"
 */
void check_post(int rc, const std::string &call);

/**
 * @brief As check_post(), with the hint chosen by the caller for the errno the post failed with.
 * @param rc   what the post returned
 * @param call description of the post
 * @param hint gives the hint for an errno value
 */
void check_post(int rc, const std::string &call, const std::function<std::string(int)> &hint);

/**
 * @brief As check_rc(), with the hint chosen by the caller for the errno the call failed with.
 * @param rc   what the call returned
 * @param call description of the call
 * @param hint gives the hint for an errno value
 */
void check_rc(int rc, const std::string &call, const std::function<std::string(int)> &hint);

/**
 * @brief Check the result of ibv_poll_cq: negative is an error, otherwise the number of completions.
 * @param n what ibv_poll_cq returned
 * @return @p n when it is not negative
 */
int check_poll(int n);

/**
 * @brief Check a work completion: its status must be IBV_WC_SUCCESS and its opcode @p expected.
 * @param wc       the completion taken from the CQ
 * @param expected the opcode this completion must have (a successful completion with another opcode
 *                 is a protocol error)
 * @param what     what the work request was, for the message, e.g. "RDMA WRITE"
 */
void check_wc(const ibv_wc &wc, ibv_wc_opcode expected, const std::string &what);

} // namespace rdma_samples
