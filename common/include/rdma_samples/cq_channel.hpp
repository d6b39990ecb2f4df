/**
 * @file cq_channel.hpp
 * @brief One wait on a completion channel, for the lessons that use one but do not teach it: arm the CQ,
 * poll once more, sleep in poll() on the channel's fd (and the caller's other fds) bounded by -t, take
 * the event and acknowledge it.
 *
 * Chapter 9 (rdma_multi_conn/receiving.hpp) writes this wait out and explains it; rdma_event_loop's
 * server drains a non-blocking channel from epoll instead (chapter 16). Everyone else calls these two.
 */
#pragma once

#include <infiniband/verbs.h>

#include <poll.h>

#include <span>

namespace rdma_samples {

/**
 * @brief Arm @p cq (ibv_req_notify_cq()), then poll it once more.
 *
 * Arming asks for an event at the CQ's NEXT completion: a completion that came after the caller's last
 * empty poll but before the arm raises no event, and a sleep now would sleep through it. So the CQ is
 * polled again after arming; sleep_on_cq_channel() is safe only when this took nothing. (What it took
 * still raises the armed event later: the next sleep takes that event and returns at once.)
 * @param cq the CQ, created with a completion channel
 * @param wc where the completions go (up to wc.size() of them)
 * @return how many completions were taken, 0 when the CQ is still empty
 */
int arm_cq_and_poll(ibv_cq *cq, std::span<ibv_wc> wc);

/**
 * @brief Sleep in poll() on the completion channel's fd and on @p others, at most @p wait_ms; when the
 * channel has an event, take it (ibv_get_cq_event()) and acknowledge it (ibv_ack_cq_events()).
 *
 * Acknowledgement policy: each event is acknowledged as soon as it is taken, one by one. Every event
 * taken must be acknowledged before its CQ is destroyed (ibv_destroy_cq() waits for them all), and a
 * wait that keeps none back between calls can never leave one behind, whatever throws later. Acknowledging
 * in batches only saves the mutex ibv_ack_cq_events() takes; here an event comes only after a sleep (the
 * CQ was empty), whose system calls cost far more than the lock. rdma_event_loop, which drains many events
 * per wake-up, acknowledges them with one call (chapter 16).
 *
 * poll() bounds the sleep, which ibv_get_cq_event() on a blocking channel alone would not. After it,
 * poll the CQ until it is empty: the event says only that something came.
 * @param channel the CQ's completion channel
 * @param others  other fds to watch (a CM event channel, the device's async fd); their revents are set;
 *                an entry whose fd is -1 is skipped
 * @param wait_ms the longest sleep, in milliseconds (Deadline::left_ms())
 * @return how many fds had events (the channel counts as one); 0 when none came in time or a signal cut
 *         the sleep short (EINTR): the caller's deadline tells which
 */
int sleep_on_cq_channel(ibv_comp_channel *channel, std::span<pollfd> others, int wait_ms);

} // namespace rdma_samples
