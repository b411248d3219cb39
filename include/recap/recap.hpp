/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recap/recap.hpp — a header-only C++17 layer over recap's C API (recap.h): move-only owners of
 * graphs, generators and graph sets, scope objects for a capture and a region, conditions as
 * values, and failures as exceptions. The C API stays the source of truth: every member calls
 * one C function, `.get()` hands out the C handle, and the options are the C structs, started
 * from the C INIT macros (recap::capture_options() and the like return them). See docs/cpp.md.
 *
 * Failures. With exceptions, a failed call throws recap::error, which carries the status and
 * recap_last_error()'s message. Built without exceptions (-fno-exceptions, or RECAP_NO_EXCEPTIONS
 * defined), a failed call goes to the error handler set with recap::set_error_handler (default:
 * print the status and message to stderr), then std::abort(): code that must handle a failure
 * itself calls the C function on `.get()` and reads its status. The two builds put their
 * definitions in different inline namespaces, so translation units built each way link together.
 *
 * Destructors never throw: they call the C release function and drop its status.
 */
#ifndef RECAP_RECAP_HPP
#define RECAP_RECAP_HPP

#if !defined(__cplusplus) || __cplusplus < 201703L
#  error "recap/recap.hpp needs C++17 or later; C programs include recap.h"
#endif

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../recap.h"

#if defined(RECAP_NO_EXCEPTIONS) || !(defined(__cpp_exceptions) || defined(__EXCEPTIONS))
#  define RECAP_CPP_EXCEPTIONS 0
#else
#  define RECAP_CPP_EXCEPTIONS 1
#  include <exception>
#  include <stdexcept>
#endif

namespace recap {
#if RECAP_CPP_EXCEPTIONS
inline namespace throwing {
#else
inline namespace aborting {
#endif

/* ---- Failures -------------------------------------------------------------------------------- */

#if RECAP_CPP_EXCEPTIONS
/* What a failed call throws: its status, and recap_last_error() at the failure as what(). */
class error : public std::runtime_error {
 public:
  error(recap_status_t status, const std::string &message)
      : std::runtime_error(message.empty() ? recap_status_string(status) : message),
        status_(status) {}
  recap_status_t status() const noexcept { return status_; }
  /* "RECAP_ERROR_INVALID_USAGE" and the like (recap_status_name). */
  const char *status_name() const noexcept { return recap_status_name(status_); }

 private:
  recap_status_t status_;
};
#else
/* Called with a failed call's status and recap_last_error(); std::abort() follows its return. */
using error_handler = void (*)(recap_status_t status, const char *message);

namespace detail {
inline error_handler &handler_slot() noexcept {
  static error_handler handler = nullptr;
  return handler;
}
} // namespace detail

/* Install handler (nullptr: the default, which prints to stderr) and return the previous one.
 * Not synchronised: set it before other threads use the layer. */
inline error_handler set_error_handler(error_handler handler) noexcept {
  error_handler previous = detail::handler_slot();
  detail::handler_slot() = handler;
  return previous;
}
#endif

namespace detail {
[[noreturn]] inline void fail(recap_status_t status) {
  const char *message = recap_last_error();
#if RECAP_CPP_EXCEPTIONS
  throw error(status, message);
#else
  if (error_handler handler = handler_slot()) handler(status, message);
  std::fprintf(stderr, "recap: %s: %s\n", recap_status_name(status),
               message[0] ? message : recap_status_string(status));
  std::abort();
#endif
}
} // namespace detail

/* Throw recap::error (or call the error handler) unless status is RECAP_SUCCESS. */
inline void check(recap_status_t status) {
  if (status != RECAP_SUCCESS) detail::fail(status);
}

/* ---- Options: the C structs, from their INIT macros ------------------------------------------ */

inline recap_capture_options_t capture_options() noexcept {
  recap_capture_options_t options = RECAP_CAPTURE_OPTIONS_INIT;
  return options;
}
inline recap_scope_options_t scope_options() noexcept {
  recap_scope_options_t options = RECAP_SCOPE_OPTIONS_INIT;
  return options;
}
inline recap_graph_set_options_t graph_set_options() noexcept {
  recap_graph_set_options_t options = RECAP_GRAPH_SET_OPTIONS_INIT;
  return options;
}

/* A fresh pool id that several captures share (recap_pool_handle): a value, which holds no
 * reference; each graph that captures into it takes one and drops it at its reset. */
inline recap_pool_id_t new_pool() noexcept { return recap_pool_handle(); }

namespace detail {
/* A move-only owner of a C handle; Release is the C function that frees it. */
template <typename Handle, recap_status_t (*Release)(Handle)>
class owner {
 public:
  owner() noexcept = default;
  explicit owner(Handle handle) noexcept : handle_(handle) {}
  owner(owner &&other) noexcept : handle_(other.release()) {}
  owner &operator=(owner &&other) noexcept {
    if (this != &other) replace(other.release());
    return *this;
  }
  owner(const owner &) = delete;
  owner &operator=(const owner &) = delete;
  ~owner() { replace(nullptr); }

  /* The C handle, still owned here; nullptr once moved from or released. */
  Handle get() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_ != nullptr; }
  /* Give up ownership: the caller frees the handle with the C function. */
  Handle release() noexcept { return std::exchange(handle_, nullptr); }

 protected:
  /* Free the handle held (its status dropped) and own `handle` instead. */
  void replace(Handle handle) noexcept {
    Handle old = std::exchange(handle_, handle);
    if (old) {
      recap_status_t ignored = Release(old);
      (void)ignored;
    }
  }

 private:
  Handle handle_ = nullptr;
};
} // namespace detail

/* ---- Graph parameters (recap/params.h) ------------------------------------------------------- */

namespace detail {
template <typename T>
struct param_type;
template <>
struct param_type<std::int32_t> {
  static constexpr recap_param_type_t value = RECAP_PARAM_INT32;
};
template <>
struct param_type<std::int64_t> {
  static constexpr recap_param_type_t value = RECAP_PARAM_INT64;
};
template <>
struct param_type<float> {
  static constexpr recap_param_type_t value = RECAP_PARAM_FLOAT;
};
template <>
struct param_type<double> {
  static constexpr recap_param_type_t value = RECAP_PARAM_DOUBLE;
};
} // namespace detail

/* A graph parameter whose value is a T (std::int32_t, std::int64_t, float or double): a value
 * naming the C handle, which its graph owns for its whole life (graph::declare_param). */
template <typename T>
class param {
  static_assert(sizeof(detail::param_type<T>) > 0, "a parameter is int32, int64, float or double");

 public:
  param() noexcept = default;
  explicit param(recap_param_t handle) noexcept : handle_(handle) {}
  recap_param_t get() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_ != nullptr; }
  /* recap_param_set: the next replay computes with value. */
  void set(T value) { check(recap_param_set(handle_, &value)); }
  /* The value in the capture its graph holds (recap_param_info). */
  T value() const {
    recap_param_info_t info = RECAP_PARAM_INFO_INIT;
    check(recap_param_info(handle_, &info));
    T out;
    std::memcpy(&out, &info.bits, sizeof out);
    return out;
  }

 private:
  recap_param_t handle_ = nullptr;
};

/* ---- Graphs (recap/graph.h) ------------------------------------------------------------------ */

class graph : public detail::owner<recap_graph_t, recap_graph_destroy> {
 public:
  /* A new empty graph (recap_graph_create); flags 0 or RECAP_GRAPH_KEEP. */
  explicit graph(unsigned flags = 0) {
    recap_graph_t handle = nullptr;
    check(recap_graph_create(&handle, flags));
    replace(handle);
  }
  /* Own a graph made with the C API. */
  static graph adopt(recap_graph_t handle) noexcept { return graph(handle, adopt_tag{}); }

  void capture_begin(recap_stream_t stream,
                     const recap_capture_options_t &options = capture_options()) {
    check(recap_graph_capture_begin(get(), &options, stream));
  }
  void capture_end() { check(recap_graph_capture_end(get())); }
  void instantiate() { check(recap_graph_instantiate(get())); }
  void replay(recap_stream_t stream) { check(recap_graph_replay(get(), stream)); }
  /* Back to a fresh graph (recap_graph_reset); a capture under way is abandoned. */
  void reset() { check(recap_graph_reset(get())); }

  /* Capture what work(stream) enqueues on stream: capture_begin, work, capture_end. If work
   * throws, the capture is discarded (the graph is fresh again) and the exception goes on. */
  template <typename Work>
  void capture(recap_stream_t stream, Work &&work,
               const recap_capture_options_t &options = capture_options());
  /* The same in a capture scope (recap_capture_scope_begin: the device synchronised, the cache
   * emptied, recap's side stream unless options.stream names one): PyTorch's
   * `with torch.cuda.graph(g):`. work gets the stream to enqueue on. */
  template <typename Work>
  void capture_scope(Work &&work, const recap_scope_options_t &options = scope_options());

  recap_graph_state_t state() const {
    recap_graph_state_t value = RECAP_GRAPH_STATE_FRESH;
    check(recap_graph_state(get(), &value));
    return value;
  }
  recap_pool_id_t pool() const {
    recap_pool_id_t value = {0, 0};
    check(recap_graph_pool(get(), &value));
    return value;
  }
  std::size_t node_count() const {
    std::size_t value = 0;
    check(recap_graph_node_count(get(), &value));
    return value;
  }
  recap_cuda_graph_t raw() const {
    recap_cuda_graph_t value = nullptr;
    check(recap_graph_raw(get(), &value));
    return value;
  }
  recap_cuda_graph_exec_t raw_exec() const {
    recap_cuda_graph_exec_t value = nullptr;
    check(recap_graph_raw_exec(get(), &value));
    return value;
  }
  /* During this graph's capture: the parameter `name` with its initial value
   * (recap_graph_param_declare); the kernels take the returned placeholder in its place. */
  template <typename T>
  T declare_param(const char *name, T initial, param<T> *handle = nullptr) {
    T placeholder;
    recap_param_t made = nullptr;
    check(recap_graph_param_declare(get(), name, detail::param_type<T>::value, &initial,
                                    &placeholder, &made));
    if (handle) *handle = param<T>(made);
    return placeholder;
  }
  void set_eager(bool eager) { check(recap_graph_eager_set(get(), eager ? 1 : 0)); }
  bool eager() const {
    int value = 0;
    check(recap_graph_eager_get(get(), &value));
    return value != 0;
  }

 private:
  struct adopt_tag {};
  graph(recap_graph_t handle, adopt_tag) noexcept : owner(handle) {}
};

/* A capture of one graph, as a scope: the constructor begins it, end() ends it (and throws on
 * failure), and a capture not ended when the object goes (an exception unwinding through it, or
 * a return before end()) is discarded with recap_graph_reset: the graph is fresh again. Neither
 * copied nor moved; the graph must outlive it. */
class capture {
 public:
  /* recap_graph_capture_begin on a stream of the caller's. */
  capture(graph &g, recap_stream_t stream,
          const recap_capture_options_t &options = capture_options())
      : graph_(g.get()), stream_(stream), scope_(false) {
    g.capture_begin(stream, options);
  }
  /* recap_capture_scope_begin: stream() is the stream to enqueue the work on. */
  explicit capture(graph &g, const recap_scope_options_t &options = scope_options())
      : graph_(g.get()), scope_(true) {
    check(recap_capture_scope_begin(graph_, &options, &stream_));
  }
  capture(const capture &) = delete;
  capture &operator=(const capture &) = delete;
  ~capture() {
    if (open_) {
      recap_status_t ignored = recap_graph_reset(graph_);
      (void)ignored;
    }
  }

  recap_stream_t stream() const noexcept { return stream_; }
  /* True until end() succeeds. */
  bool open() const noexcept { return open_; }
  /* End the capture (recap_graph_capture_end or recap_capture_scope_end). On failure the
   * capture stays this object's, which discards it unless a retry of end() succeeds. */
  void end() {
    check(scope_ ? recap_capture_scope_end(graph_) : recap_graph_capture_end(graph_));
    open_ = false;
  }

 private:
  recap_graph_t graph_;
  recap_stream_t stream_ = nullptr;
  bool scope_;
  bool open_ = true;
};

template <typename Work>
void graph::capture(recap_stream_t stream, Work &&work, const recap_capture_options_t &options) {
  recap::capture scope(*this, stream, options);
  std::forward<Work>(work)(scope.stream());
  scope.end();
}

template <typename Work>
void graph::capture_scope(Work &&work, const recap_scope_options_t &options) {
  recap::capture scope(*this, options);
  std::forward<Work>(work)(scope.stream());
  scope.end();
}

/* ---- Random numbers (recap/rng.h) ------------------------------------------------------------ */

class generator : public detail::owner<recap_generator_t, recap_generator_destroy> {
 public:
  explicit generator(std::uint64_t seed = 0) {
    recap_generator_t handle = nullptr;
    check(recap_generator_create(&handle, seed));
    replace(handle);
  }

  std::uint64_t seed() const {
    std::uint64_t value = 0;
    check(recap_generator_seed_get(get(), &value));
    return value;
  }
  void set_seed(std::uint64_t seed) { check(recap_generator_seed_set(get(), seed)); }
  std::uint64_t offset() const {
    std::uint64_t value = 0;
    check(recap_generator_offset_get(get(), &value));
    return value;
  }
  void set_offset(std::uint64_t offset) { check(recap_generator_offset_set(get(), offset)); }
  /* The state for a kernel about to be enqueued on stream (recap_generator_philox_state). */
  recap_philox_state_t philox_state(std::uint64_t increment, recap_stream_t stream) {
    recap_philox_state_t state{};
    check(recap_generator_philox_state(get(), increment, stream, &state));
    return state;
  }

  void uniform(float *out, std::size_t n, recap_stream_t stream) {
    check(recap_rng_uniform(get(), out, n, stream));
  }
  void normal(float *out, std::size_t n, float mean, float stddev, recap_stream_t stream) {
    check(recap_rng_normal(get(), out, n, mean, stddev, stream));
  }
  void randint(std::int32_t *out, std::size_t n, std::int32_t low, std::int32_t high,
               recap_stream_t stream) {
    check(recap_rng_randint(get(), out, n, low, high, stream));
  }
  void dropout(const float *in, float *out, std::uint8_t *mask, std::size_t n, float p,
               recap_stream_t stream) {
    check(recap_rng_dropout(get(), in, out, mask, n, p, stream));
  }
};

/* ---- Regions (recap/region.h) ---------------------------------------------------------------- */

/* A condition: a value the graph whose capture made it owns (there is nothing to free). */
class condition {
 public:
  /* recap_cond_create in the capture on stream, `initial` each time a replay reaches here. */
  condition(unsigned initial, recap_stream_t stream) {
    check(recap_cond_create(&cond_, initial, stream));
  }
  /* Wrap a condition made with the C API. */
  explicit condition(recap_cond_t cond) noexcept : cond_(cond) {}

  recap_cond_t get() const noexcept { return cond_; }

  /* The ready kernels (enqueued on stream): cond = value, = *value, countdown, compare. */
  void set_value(unsigned value, recap_stream_t stream) const {
    check(recap_cond_set_value(cond_, value, stream));
  }
  void set_from(const std::uint32_t *value, recap_stream_t stream) const {
    check(recap_cond_set_from(cond_, value, stream));
  }
  void countdown(std::uint32_t *counter, recap_stream_t stream) const {
    check(recap_cond_countdown(cond_, counter, stream));
  }
  void compare(const recap_cond_compare_t &compare, recap_stream_t stream) const {
    check(recap_cond_compare(cond_, &compare, stream));
  }

 private:
  recap_cond_t cond_{};
};

/* A region of the capture on stream, as a scope: the constructor opens it (recap_region_begin),
 * next_branch() moves to the next branch, end() closes it (and throws on failure). One still
 * open when the object goes is closed with recap_region_end, its status dropped: when an
 * exception unwinds, the enclosing recap::capture then discards the capture. */
class region {
 public:
  region(recap_region_kind_t kind, const condition &cond, recap_stream_t stream,
         unsigned branches = 0)
      : stream_(stream) {
    check(recap_region_begin(kind, cond.get(), branches, stream));
  }
  region(const region &) = delete;
  region &operator=(const region &) = delete;
  ~region() {
    if (open_) {
      recap_status_t ignored = recap_region_end(stream_);
      (void)ignored;
    }
  }

  void next_branch() { check(recap_region_next_branch(stream_)); }
  void end() {
    open_ = false;
    check(recap_region_end(stream_));
  }

 private:
  recap_stream_t stream_;
  bool open_ = true;
};

/* ---- Graph sets (recap/graph_set.h) ---------------------------------------------------------- */

/* What graph_set::run did: the size that ran, and whether a graph was replayed. */
struct run_result {
  std::size_t padded;
  bool graphed;
};

/* A graph set over a C++ step: any callable of (std::size_t size, recap_stream_t stream)
 * returning void (success unless it throws) or recap_status_t. The set keeps the callable at a
 * fixed address for its life; it may run on the set's helper thread (BACKGROUND). A step that
 * throws fails that run or capture: a recap::error with its own status and message, any other
 * exception with RECAP_ERROR_INVALID_USAGE and its what(); run() then throws a recap::error. */
class graph_set : public detail::owner<recap_graph_set_t, recap_graph_set_destroy> {
 public:
  template <typename Step>
  graph_set(Step &&step, const recap_graph_set_options_t &options)
      : step_(std::make_unique<step_fn>(adapt(std::forward<Step>(step)))) {
    recap_graph_set_t handle = nullptr;
    check(recap_graph_set_create(&handle, &graph_set::call_step, step_.get(), &options));
    replace(handle);
  }
  graph_set(graph_set &&) noexcept = default;
  /* The old set goes before its step. */
  graph_set &operator=(graph_set &&other) noexcept {
    if (this != &other) {
      owner::operator=(std::move(other));
      step_ = std::move(other.step_);
    }
    return *this;
  }
  ~graph_set() { replace(nullptr); }

  run_result run(std::size_t n, recap_stream_t stream) {
    run_result result{0, false};
    int graphed = 0;
    check(recap_graph_set_run(get(), n, stream, &result.padded, &graphed));
    result.graphed = graphed != 0;
    return result;
  }
  std::size_t bucket(std::size_t n) const {
    std::size_t value = 0;
    check(recap_graph_set_bucket(get(), n, &value));
    return value;
  }
  void wait() { check(recap_graph_set_wait(get())); }
  void cancel() { check(recap_graph_set_cancel(get())); }
  /* Capture one size now, on this thread (0: every size not ready). */
  void capture(std::size_t size = 0) { check(recap_graph_set_capture(get(), size)); }
  void evict(std::size_t size) { check(recap_graph_set_evict(get(), size)); }
  std::size_t evict_idle(double idle_seconds) {
    std::size_t evicted = 0;
    check(recap_graph_set_evict_idle(get(), idle_seconds, &evicted));
    return evicted;
  }
  std::vector<std::size_t> sizes() const {
    std::size_t count = 0;
    check(recap_graph_set_sizes(get(), nullptr, 0, &count));
    std::vector<std::size_t> values(count);
    check(recap_graph_set_sizes(get(), values.data(), values.size(), &count));
    values.resize(count);
    return values;
  }
  recap_graph_set_member_t member(std::size_t size) const {
    recap_graph_set_member_t info = RECAP_GRAPH_SET_MEMBER_INIT;
    check(recap_graph_set_member(get(), size, &info));
    return info;
  }
  recap_graph_set_info_t info() const {
    recap_graph_set_info_t value = RECAP_GRAPH_SET_INFO_INIT;
    check(recap_graph_set_info(get(), &value));
    return value;
  }

 private:
  using step_fn = std::function<recap_status_t(std::size_t, recap_stream_t)>;

  template <typename Step>
  static step_fn adapt(Step &&step) {
    using returned = std::invoke_result_t<Step &, std::size_t, recap_stream_t>;
    if constexpr (std::is_void_v<returned>) {
      return [fn = std::forward<Step>(step)](std::size_t size, recap_stream_t stream) mutable {
        fn(size, stream);
        return RECAP_SUCCESS;
      };
    } else {
      static_assert(std::is_convertible_v<returned, recap_status_t>,
                    "a graph set's step returns void or recap_status_t");
      return step_fn(std::forward<Step>(step));
    }
  }

  static recap_status_t call_step(std::size_t size, recap_stream_t stream, void *user_data) {
    step_fn &step = *static_cast<step_fn *>(user_data);
#if RECAP_CPP_EXCEPTIONS
    try {
      return step(size, stream);
    } catch (const error &e) {
      return recap_set_last_error(e.status(), "%s", e.what());
    } catch (const std::exception &e) {
      return recap_set_last_error(RECAP_ERROR_INVALID_USAGE, "the step threw: %s", e.what());
    } catch (...) {
      return recap_set_last_error(RECAP_ERROR_INVALID_USAGE, "the step threw an exception");
    }
#else
    return step(size, stream);
#endif
  }

  std::unique_ptr<step_fn> step_;
};

} // inline namespace
} // namespace recap

#endif /* RECAP_RECAP_HPP */
