/**
 * @file log.hpp
 * @brief Numbered lesson steps on stdout, verbose traces of verbs calls.
 *
 * Every sample announces what it is about to do with step(), so its output reads like the lesson's
 * list of steps. Errors never go through these functions: they go to stderr from main().
 */
#pragma once

namespace rdma_samples {

/**
 * @brief Announce lesson step @p n and remember it, so that an error can say which step failed.
 * @param n   step number, starting at 1
 * @param fmt printf-style description of the step and the values that matter
 */
void step(int n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/**
 * @brief Print an indented detail line under the current step (a QPN, an address, a wait).
 * @param fmt printf-style text
 */
void info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/**
 * @brief Print a result line, unindented: the lines a user (and a test) looks for.
 * @param fmt printf-style text
 */
void result(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/**
 * @brief With -v, print one traced verbs call; otherwise do nothing.
 * @param fmt printf-style text, e.g. "ibv_alloc_pd(ctx) = 0x55d0..."
 */
void trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/** @brief The step most recently announced with step().
 *  @return its number, or 0 before the first */
int current_step();

/** @brief Switch the verbose trace (-v) on or off.
 *  @param on true for -v */
void set_verbose(bool on);

/** @brief Whether -v was given.
 *  @return true when verbose */
bool verbose();

} // namespace rdma_samples
