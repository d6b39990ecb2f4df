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
 * The hints live in one table, in check.cpp.
 */
#pragma once

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>
#include <functional>
#include <optional>
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
 * @brief A value from outside (a flag, a line of a file) quoted for a one-line message: control bytes,
 * bytes that are not ASCII, quotes and backslashes escaped (\\n, \\r, \\t, \\xNN), and cut after
 * @p max characters with the full size added, so no terminal ever sees a raw control byte or a 100 KB line.
 * @param text the value, any bytes
 * @param max  the most characters of @p text shown
 * @return e.g. "\"abc\"", "\"a\\x00b\"", "\"aaaa...\" (100000 bytes)"
 */
std::string quote(const std::string &text, std::size_t max = 60);

/** @brief How parse_unsigned() reads digits. */
enum class NumberBase {
    decimal,  ///< digits 0-9 only (a descriptor's psn, mtu...)
    hex,      ///< "0x" then lowercase hex digits (a descriptor's addresses and keys)
    either,   ///< decimal, or "0x"/"0X" then hex digits of either case (a flag's value)
};

/**
 * @brief The one number parser: an unsigned integer of @p base, at most @p max, nothing else around it.
 *
 * Flags (parse_number()) and descriptor files both read their numbers here; each wraps a failure in
 * its own message (which flag, which file and line).
 * @param text the value as typed or read
 * @param base which digits are accepted
 * @param max  the largest value accepted
 * @return the value, or nothing when @p text is not such a number (empty, a stray byte, too large)
 */
std::optional<std::uint64_t> parse_unsigned(const std::string &text, NumberBase base, std::uint64_t max = UINT64_MAX);

/**
 * @brief The hint for a failed call, from the one table.
 * @param call the verbs or system call, e.g. "ibv_reg_mr" or "ibv_modify_qp(RTR)"
 * @param err  the errno value it failed with
 * @return one line of advice, never empty
 */
std::string hint_for_errno(const std::string &call, int err);

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
 * @brief Throw an Error for @p call failing with @p err, with the errno text and its hint.
 * @param call description of the call, including the arguments that matter
 * @param err  errno value
 */
[[noreturn]] void fail_errno(const std::string &call, int err);

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
template <typename T> T *check(T *ptr, const std::string &call)
{
    if (ptr == nullptr)
        fail_errno(call, errno != 0 ? errno : EINVAL);
    detail::trace_pointer(call, ptr);
    return ptr;
}

/**
 * @brief Check an int returned by a verbs call. Verbs return 0 on success and either an errno value
 * or -1 with errno set on failure; both are handled.
 * @param rc   what the call returned
 * @param call description of the call
 */
void check_rc(int rc, const std::string &call);

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

/**
 * @brief Take, without waiting, each asynchronous event the device has reported so far (at most 16):
 * hand it to @p fn, then acknowledge it (ibv_ack_async_event()).
 * @param ctx the device context
 * @param fn  called once per event, before it is acknowledged
 */
void for_each_async_event(ibv_context *ctx, const std::function<void(const ibv_async_event &)> &fn);

/**
 * @brief The asynchronous events the device has reported so far, taken without blocking.
 *
 * Errors that belong to no work request arrive on the device's async event queue, not on a CQ:
 * IBV_EVENT_QP_FATAL (the QP broke), IBV_EVENT_CQ_ERR (the CQ overran: it was too small),
 * IBV_EVENT_PORT_ERR (the link went down). They explain why "nothing ever completes". Each event is
 * taken with ibv_get_async_event() and acknowledged with ibv_ack_async_event().
 * @param ctx the device context
 * @return e.g. "IBV_EVENT_QP_FATAL on QP 0x000012", several separated by ", ", or "" when none
 */
std::string take_async_events(ibv_context *ctx);

/**
 * @brief The enum name of an asynchronous event, e.g. "IBV_EVENT_QP_FATAL".
 * @param type the event type
 * @return its name
 */
const char *async_event_name(ibv_event_type type);

/**
 * @brief @p e again, with the device's asynchronous events (take_async_events()), if it reported any,
 * added to the message: "... (the device reported: IBV_EVENT_QP_FATAL on QP 0x000011)".
 * @param e   the error
 * @param ctx the device context
 * @return the error to throw
 */
Error with_async_events(const Error &e, ibv_context *ctx);

} // namespace rdma_samples
