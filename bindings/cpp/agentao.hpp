// agentao.hpp: the C++17 binding of libagentao (header-only, over agentao.h).
//
// Ownership: `agent`, `cancel_token`, `stream`, `host_event_stream` and `reply` own one C
// handle each; they are movable, not copyable, and release it in their destructor.
// Strings go in as std::string_view (copied for the call; an embedded NUL is
// status::invalid_argument) and come out as std::string.
//
// Errors: every fallible call has a throwing form (`chat`) that throws agentao::error, and a
// non-throwing form (`try_chat`) that returns agentao::result<T>. Define AGENTAO_NO_EXCEPTIONS
// (implied by -fno-exceptions) to get only the non-throwing forms.
//
// Callbacks (transport, observers, completions, deltas) run on library threads. An exception
// a callback throws never reaches the library: it is caught at the C boundary, and a request
// it leaves unanswered is failed with the exception's message (see docs/bindings.md).
#ifndef AGENTAO_HPP
#define AGENTAO_HPP

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "agentao.h"

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND)
#define AGENTAO_DETAIL_CAN_CATCH 1
#else
#define AGENTAO_DETAIL_CAN_CATCH 0
#ifndef AGENTAO_NO_EXCEPTIONS
#define AGENTAO_NO_EXCEPTIONS 1
#endif
#endif

namespace agentao {

/// The status of a failed call: agentao_status, one to one.
enum class status : int32_t {
    ok = AGENTAO_STATUS_OK,
    null_argument = AGENTAO_STATUS_NULL_ARGUMENT,
    invalid_argument = AGENTAO_STATUS_INVALID_ARGUMENT,
    invalid_utf8 = AGENTAO_STATUS_INVALID_UTF8,
    invalid_json = AGENTAO_STATUS_INVALID_JSON,
    invalid_config = AGENTAO_STATUS_INVALID_CONFIG,
    turn_in_progress = AGENTAO_STATUS_TURN_IN_PROGRESS,
    no_subscribe = AGENTAO_STATUS_NO_SUBSCRIBE,
    stream_subscribe = AGENTAO_STATUS_STREAM_SUBSCRIBE,
    cancelled = AGENTAO_STATUS_CANCELLED,
    timeout = AGENTAO_STATUS_TIMEOUT,
    reentrant = AGENTAO_STATUS_REENTRANT,
    panic = AGENTAO_STATUS_PANIC,
    internal = AGENTAO_STATUS_INTERNAL,
    host_error = AGENTAO_STATUS_HOST_ERROR,
    closed = AGENTAO_STATUS_CLOSED,
    no_engine = AGENTAO_STATUS_NO_ENGINE,
    events_dropped = AGENTAO_STATUS_EVENTS_DROPPED,
    conflict = AGENTAO_STATUS_CONFLICT,
    store_unavailable = AGENTAO_STATUS_STORE_UNAVAILABLE,
    corrupt_session = AGENTAO_STATUS_CORRUPT_SESSION,
};

/// A short static name of a status ("AGENTAO_STATUS_CANCELLED"), for logs.
inline const char* status_name(status s) noexcept {
    return agentao_status_name(static_cast<int32_t>(s));
}

/// The answers to a tool confirmation.
enum class confirmation : int32_t {
    allow = AGENTAO_CONFIRMATION_ALLOW,
    deny = AGENTAO_CONFIRMATION_DENY,
    deny_unavailable = AGENTAO_CONFIRMATION_DENY_UNAVAILABLE,
};

/// A failure: a status and the library's message. Thrown by the throwing API, carried by
/// result<T> in the non-throwing one.
class error : public std::runtime_error {
public:
    error(status code, const std::string& message) : std::runtime_error(message), code_(code) {}
    status code() const noexcept { return code_; }

private:
    status code_;
};

namespace detail {
[[noreturn]] inline void fail_unchecked(const agentao::error& e) {
#if defined(AGENTAO_NO_EXCEPTIONS) || !AGENTAO_DETAIL_CAN_CATCH
    std::fprintf(stderr, "agentao: value() of a failed result: %s: %s\n", status_name(e.code()),
                 e.what());
    std::abort();
#else
    throw e;
#endif
}
}  // namespace detail

/// The outcome of a non-throwing call: a T, or an agentao::error. value() on a failed result
/// throws that error (aborts when built without exceptions): check ok() first.
template <class T>
class [[nodiscard]] result {
public:
    result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
    result(agentao::error e) : v_(std::in_place_index<1>, std::move(e)) {}

    bool ok() const noexcept { return v_.index() == 0; }
    explicit operator bool() const noexcept { return ok(); }
    status code() const noexcept { return ok() ? status::ok : std::get_if<1>(&v_)->code(); }

    T& value() & {
        check();
        return *std::get_if<0>(&v_);
    }
    const T& value() const& {
        check();
        return *std::get_if<0>(&v_);
    }
    T&& value() && {
        check();
        return std::move(*std::get_if<0>(&v_));
    }
    T* operator->() { return &value(); }
    T& operator*() & { return value(); }

    /// The error; only on a failed result.
    const agentao::error& error() const& {
        if (ok()) std::abort();
        return *std::get_if<1>(&v_);
    }

private:
    void check() const {
        if (!ok()) detail::fail_unchecked(*std::get_if<1>(&v_));
    }
    std::variant<T, agentao::error> v_;
};

template <>
class [[nodiscard]] result<void> {
public:
    result() = default;
    result(agentao::error e) : e_(std::move(e)) {}

    bool ok() const noexcept { return !e_.has_value(); }
    explicit operator bool() const noexcept { return ok(); }
    status code() const noexcept { return ok() ? status::ok : e_->code(); }
    void value() const {
        if (e_) detail::fail_unchecked(*e_);
    }
    const agentao::error& error() const& {
        if (ok()) std::abort();
        return *e_;
    }

private:
    std::optional<agentao::error> e_;
};

namespace detail {

inline agentao::error take_error(agentao_status st, agentao_error* err) {
    std::string message = err ? agentao_error_message(err) : agentao_status_name(st);
    agentao_error_free(err);
    return agentao::error(static_cast<status>(st), message);
}

// The library stops a C string at its first NUL; a view with one inside would be silently
// cut short, so it is refused instead.
inline std::optional<agentao::error> check_view(std::string_view s, const char* what) {
    if (s.find('\0') == std::string_view::npos) return std::nullopt;
    return agentao::error(status::invalid_argument, std::string(what) + " contains a NUL byte");
}

// Strings the library passes to callbacks are never NULL; this keeps a view well-defined if one were.
inline std::string_view view(const char* s) noexcept { return s ? std::string_view(s) : std::string_view(); }

inline std::string take_string(char* s) {
    std::string out = s ? s : "";
    agentao_string_free(s);
    return out;
}

template <class F>
result<void> call(F&& f) {
    agentao_error* err = nullptr;
    agentao_status st = f(&err);
    if (st == AGENTAO_STATUS_OK) {
        agentao_error_free(err);
        return {};
    }
    return take_error(st, err);
}

// A call with one `char **out`: the string on success.
template <class F>
result<std::string> call_string(F&& f) {
    char* out = nullptr;
    result<void> r = call([&](agentao_error** e) { return f(&out, e); });
    if (!r) {
        agentao_string_free(out);
        return r.error();
    }
    return take_string(out);
}

inline uint32_t to_ms(std::chrono::milliseconds t) {
    if (t.count() <= 0) return 0;
    if (t.count() >= std::numeric_limits<uint32_t>::max())
        return std::numeric_limits<uint32_t>::max();
    return static_cast<uint32_t>(t.count());
}

// try { body } catch (everything) { on_exception(message) }, and plain `body` without
// exceptions. `on_exception` must not throw; its argument is a static or borrowed string.
template <class Body, class Handler>
void guarded(Body&& body, Handler&& on_exception) noexcept {
#if AGENTAO_DETAIL_CAN_CATCH
    try {
        body();
    } catch (const std::exception& e) {
        on_exception(e.what());
    } catch (...) {
        on_exception("an exception that is not a std::exception");
    }
#else
    (void)on_exception;
    body();
#endif
}

// One owned C handle (an agent, a stream, a token, ...): move-only, `Free`d by its destructor.
template <class Raw, void (*Free)(Raw*)>
class handle {
public:
    handle() noexcept = default;
    explicit handle(Raw* raw) noexcept : raw_(raw) {}
    handle(handle&& o) noexcept : raw_(std::exchange(o.raw_, nullptr)) {}
    handle& operator=(handle&& o) noexcept {
        if (this != &o) {
            Free(raw_);
            raw_ = std::exchange(o.raw_, nullptr);
        }
        return *this;
    }
    handle(const handle&) = delete;
    handle& operator=(const handle&) = delete;
    ~handle() { Free(raw_); }
    Raw* get() const noexcept { return raw_; }

private:
    Raw* raw_ = nullptr;
};

/// The one shape of every pending answer a host holds (reply, tool_reply, compaction_reply,
/// hook_reply, shell_run): it owns the C handle until one consuming call takes it; moved
/// from or answered it holds NULL; destroyed unanswered it fails the request with
/// `Traits::dropped`, so a forgotten answer never leaves a turn waiting. A class built on it
/// writes only its answers. `Traits` names the handle (`raw_type`), how to fail one
/// (`fail(raw, message)`, which consumes it) and the two messages.
template <class Traits>
class pending_answer {
public:
    using raw_type = typename Traits::raw_type;

    explicit pending_answer(raw_type* raw) noexcept : raw_(raw) {}
    pending_answer(pending_answer&& o) noexcept : raw_(std::exchange(o.raw_, nullptr)) {}
    pending_answer& operator=(pending_answer&& o) noexcept {
        if (this != &o) {
            drop();
            raw_ = std::exchange(o.raw_, nullptr);
        }
        return *this;
    }
    pending_answer(const pending_answer&) = delete;
    pending_answer& operator=(const pending_answer&) = delete;
    ~pending_answer() { drop(); }

    /// Whether the request is still unanswered (and owned by this object).
    bool pending() const noexcept { return raw_ != nullptr; }

protected:
    // Takes the handle for the one consuming call; NULL when already answered or moved.
    raw_type* take() noexcept { return std::exchange(raw_, nullptr); }
    // The handle for a call that does not consume it (a shell run's output).
    raw_type* peek() const noexcept { return raw_; }

    static agentao::error answered() { return agentao::error(status::null_argument, Traits::answered); }
    // A bad argument still answers: the request fails with the argument's error, which the
    // caller gets too (the library would read a cut-short string).
    static result<void> refuse(raw_type* r, agentao::error e) {
        Traits::fail(r, e.what());
        return e;
    }

    // The answer `consume(raw, &err)`.
    template <class Consume>
    result<void> answer(Consume&& consume) {
        raw_type* r = take();
        if (!r) return answered();
        return call([&](agentao_error** e) { return consume(r, e); });
    }
    // The answer `consume(raw, text, &err)`; `what` names `text` when it has a NUL byte.
    template <class Consume>
    result<void> answer_text(std::string_view text, const char* what, Consume&& consume) {
        raw_type* r = take();
        if (!r) return answered();
        if (auto bad = check_view(text, what)) return refuse(r, std::move(*bad));
        std::string t(text);
        return call([&](agentao_error** e) { return consume(r, t.c_str(), e); });
    }

private:
    void drop() noexcept {
        if (raw_type* r = take()) Traits::fail(r, Traits::dropped);
    }
    raw_type* raw_;
};

// How a transport reply, a compaction reply and a hook reply fail.
struct reply_traits {
    using raw_type = agentao_reply;
    static void fail(agentao_reply* r, const char* message) noexcept { agentao_reply_fail(r, message, nullptr); }
    static constexpr const char* dropped = "the host dropped the reply without answering";
    static constexpr const char* answered = "the reply was already answered or moved";
};

// A host tool's reply fails as a HostToolError result.
struct tool_reply_traits {
    using raw_type = agentao_reply;
    static void fail(agentao_reply* r, const char* message) noexcept {
        agentao_reply_tool_error(r, nullptr, message, nullptr);
    }
    static constexpr const char* dropped = "the host dropped the tool call without answering";
    static constexpr const char* answered = "the tool call was already answered or moved";
};

struct shell_run_traits {
    using raw_type = agentao_shell_run;
    static void fail(agentao_shell_run* r, const char* message) noexcept {
        agentao_shell_run_fail(r, message, nullptr);
    }
    static constexpr const char* dropped = "the host dropped the run without answering";
    static constexpr const char* answered = "the run was already answered or moved";
};

}  // namespace detail

/// Waits "forever" (the longest timeout the C API takes, about 49 days).
inline constexpr std::chrono::milliseconds wait_forever{std::numeric_limits<uint32_t>::max()};

/// The library version ("MAJOR.MINOR.PATCH").
inline std::string version() { return agentao_version(); }
/// MAJOR * 1000000 + MINOR * 1000 + PATCH.
inline uint32_t version_number() noexcept { return agentao_version_number(); }
/// The JSON Schema of the host events (v3).
inline std::string host_events_schema() { return agentao_host_events_schema(); }

/// Sets the runtime's worker threads; only before the first agent is created.
inline result<void> try_set_worker_threads(uint32_t threads) {
    return detail::call([&](agentao_error** e) { return agentao_runtime_set_worker_threads(threads, e); });
}

namespace detail {
struct cancel_box {
    std::function<void(std::string_view)> fn;
    static void cancelled_cb(void* ud, const char* reason) noexcept {
        guarded([&] { static_cast<cancel_box*>(ud)->fn(view(reason)); }, [](const char*) {});
    }
    static void free_cb(void* ud) noexcept { delete static_cast<cancel_box*>(ud); }
};
}  // namespace detail

/// A callback registered with `on_cancel` (of a cancel_token, a tool_call or a shell_request)
/// or `cancel_watch::watch`. Destroying it (or `remove()`) removes the callback if it has not
/// run. It holds its own handle of the token, so it may outlive the token it came from.
/// Move-only.
class cancel_watch {
public:
    cancel_watch() noexcept = default;
    cancel_watch(cancel_watch&& o) noexcept
        : token_(std::exchange(o.token_, nullptr)), id_(std::exchange(o.id_, 0)) {}
    cancel_watch& operator=(cancel_watch&& o) noexcept {
        if (this != &o) {
            remove();
            token_ = std::exchange(o.token_, nullptr);
            id_ = std::exchange(o.id_, 0);
        }
        return *this;
    }
    cancel_watch(const cancel_watch&) = delete;
    cancel_watch& operator=(const cancel_watch&) = delete;
    ~cancel_watch() { remove(); }
    /// Removes the callback; true when it had not run (it never will).
    bool remove() noexcept {
        if (!token_) return false;
        bool removed = agentao_cancel_token_unwatch(token_, id_);
        agentao_cancel_token_free(token_);
        token_ = nullptr;
        return removed;
    }

    /// Runs `fn(reason)` once when `token` is cancelled (borrowed: a call's or a run's token
    /// will do), on the cancelling thread inside its cancel (at once, on this thread, when it
    /// already is): keep it short and non-blocking. An exception from `fn` is swallowed. The
    /// watch holds its own handle of the token, so it may outlive the borrow
    /// (agentao_cancel_token_watch).
    static result<cancel_watch> try_watch(const agentao_cancel_token* token,
                                          std::function<void(std::string_view reason)> fn) {
        if (!token) return agentao::error(status::null_argument, "the token is NULL");
        if (!fn) return agentao::error(status::null_argument, "the callback is empty");
        agentao_cancel_token* own = agentao_cancel_token_child(token);
        auto* box = new detail::cancel_box{std::move(fn)};
        uint64_t id = 0;
        agentao_error* err = nullptr;
        agentao_status st = agentao_cancel_token_watch(own, &detail::cancel_box::cancelled_cb, box,
                                                       &detail::cancel_box::free_cb, &id, &err);
        if (st != AGENTAO_STATUS_OK) {
            // The library owns the box from the call on: its free_cb already deleted it.
            agentao_cancel_token_free(own);
            return detail::take_error(st, err);
        }
        agentao_error_free(err);
        return cancel_watch(own, id);
    }
#ifndef AGENTAO_NO_EXCEPTIONS
    static cancel_watch watch(const agentao_cancel_token* token,
                              std::function<void(std::string_view reason)> fn) {
        return try_watch(token, std::move(fn)).value();
    }
#endif

private:
    cancel_watch(agentao_cancel_token* token, uint64_t id) noexcept : token_(token), id_(id) {}
    agentao_cancel_token* token_ = nullptr;
    uint64_t id_ = 0;
};

/// A cancellation token (agentao_cancel_token). Cancel it from any thread, including inside
/// callbacks; pass it to a turn through turn_options.
class cancel_token {
public:
    cancel_token() : h_(agentao_cancel_token_new()) {}

    /// Cancels with reason "user-cancel". Idempotent: the first reason wins.
    void cancel() const noexcept { agentao_cancel_token_cancel(h_.get(), nullptr); }
    /// Cancels with `reason` (up to its first NUL byte).
    void cancel(std::string_view reason) const {
        std::string r(reason);
        agentao_cancel_token_cancel(h_.get(), r.c_str());
    }
    bool is_cancelled() const noexcept { return agentao_cancel_token_is_cancelled(h_.get()); }
    /// The reason ("" while not cancelled).
    result<std::string> try_reason() const {
        return detail::call_string(
            [&](char** out, agentao_error** e) { return agentao_cancel_token_reason(h_.get(), out, e); });
    }
    /// A token cancelled with this one (never the reverse).
    cancel_token child() const { return cancel_token(agentao_cancel_token_child(h_.get())); }

    /// Runs `fn(reason)` once when the token is cancelled, on the cancelling thread inside its
    /// cancel (at once, on this thread, when it already is): keep it short and non-blocking.
    /// An exception from `fn` is swallowed. The callback stays registered while the returned
    /// watch lives (agentao_cancel_token_watch).
    result<cancel_watch> try_on_cancel(std::function<void(std::string_view reason)> fn) const {
        return cancel_watch::try_watch(h_.get(), std::move(fn));
    }

    /// The C handle, still owned by this object (NULL after a move).
    const agentao_cancel_token* get() const noexcept { return h_.get(); }

#ifndef AGENTAO_NO_EXCEPTIONS
    std::string reason() const { return try_reason().value(); }
    cancel_watch on_cancel(std::function<void(std::string_view reason)> fn) const {
        return try_on_cancel(std::move(fn)).value();
    }
#endif

private:
    explicit cancel_token(agentao_cancel_token* raw) noexcept : h_(raw) {}
    detail::handle<agentao_cancel_token, agentao_cancel_token_free> h_;
};

/// The pending answer of one confirmation, question or max-iterations request. Answer it
/// exactly once, from any thread, during the callback or later (move it out to keep it).
/// A reply destroyed unanswered fails its request ("the host dropped the reply without
/// answering"), so a forgotten reply never leaves a turn waiting.
class reply : public detail::pending_answer<detail::reply_traits> {
public:
    using pending_answer::pending_answer;

    /// Answers a confirmation.
    result<void> try_confirm(confirmation c) {
        return answer([&](agentao_reply* r, agentao_error** e) {
            return agentao_reply_confirm(r, static_cast<int32_t>(c), e);
        });
    }
    /// Answers a question.
    result<void> try_text(std::string_view text) { return answer_text(text, "the answer", agentao_reply_text); }
    /// Answers a max-iterations request with a JSON object, e.g. {"action":"continue"}.
    result<void> try_json(std::string_view json) { return answer_text(json, "the JSON answer", agentao_reply_json); }
    /// Fails the request (a confirmation or max-iterations request then ends the turn with
    /// status::host_error; a failed question becomes the tool's error and the turn goes on).
    result<void> try_fail(std::string_view message) {
        return answer_text(message, "the failure message", agentao_reply_fail);
    }

    /// Gives up ownership of the C handle (which must then be answered with agentao_reply_*).
    agentao_reply* release() noexcept { return take(); }

#ifndef AGENTAO_NO_EXCEPTIONS
    void confirm(confirmation c) { try_confirm(c).value(); }
    void text(std::string_view t) { try_text(t).value(); }
    void json(std::string_view j) { try_json(j).value(); }
    void fail(std::string_view message) { try_fail(message).value(); }
#endif
};

/// A tool call waiting for approval; the views are valid during the callback only.
struct tool_confirmation {
    std::string_view tool_name;
    std::string_view description;
    std::string_view args_json;
    std::string_view call_id;
};

/// How the agent talks to its host. Every member may be left empty: an empty function
/// behaves like the C API's NULL slot (emit discards, confirmations approve, questions get
/// the non-interactive answer, the iteration limit stops). Copied into the agent; called on
/// library threads (see docs/c-api.md for which calls may overlap).
struct transport {
    /// One internal event, `{"type": ..., "schema_version": 1, "data": {...}}`.
    std::function<void(std::string_view event_json)> emit;
    /// Approve a tool call: r.confirm(...) or r.fail(...), now or later from any thread.
    std::function<void(const tool_confirmation& call, reply&& r)> confirm_tool;
    /// Answer a question: r.text(...) or r.fail(...).
    std::function<void(std::string_view question, std::string_view hints_json, reply&& r)> ask_user;
    /// The iteration budget is spent: r.json(R"({"action":"continue"})") etc.
    std::function<void(uint32_t count, std::string_view pending_calls_json, reply&& r)>
        on_max_iterations;
    /// Whether the transport fills the C `subscribe` slot (a broadcaster that gets every
    /// emitted event). The library never calls it and streaming works either way, so it is
    /// off by default (it was on, and required, before streaming needed no fan-out).
    bool fan_out = false;
};

/// An image sent with a message (agentao_image): `image/png`, `image/jpeg`, `image/gif` or
/// `image/webp`, the raw bytes (the library checks type, size and count before the turn).
struct image {
    std::string mime_type;
    std::vector<uint8_t> data;
};

/// Options of one turn.
struct turn_options {
    /// The iteration budget; negative uses the config's value.
    int32_t max_iterations = -1;
    /// A token linked one way to the turn (may be null; must outlive the call that takes it).
    const cancel_token* cancel = nullptr;
    /// Images sent with the message (may be null or empty; must outlive the call that takes
    /// it; the library copies them). Not taken by stream_open (status::invalid_argument).
    const std::vector<image>* images = nullptr;
};

/// How an asynchronous turn ended: status::ok, or the failure and its message. `outcome_json`
/// is the TurnOutcome ("" when the turn could not produce one, e.g. a contained panic).
struct turn_result {
    status code = status::ok;
    std::string outcome_json;
    std::string message;
    bool ok() const noexcept { return code == status::ok; }
};

namespace detail {

/// The one ownership pattern of every host capability box: `new` it, hand its vtable to the
/// library, and never delete it: from the registration call on the library owns it and calls
/// `free_cb` exactly once, when it lets go and also when the registration fails.
template <class Box>
struct host_box {
    static Box* of(void* ud) noexcept { return static_cast<Box*>(ud); }
    static void free_cb(void* ud) noexcept { delete of(ud); }
    // A vtable of type V with the members every capability vtable starts with filled; the
    // callback slots are the box's to fill.
    template <class V>
    V vtable_header() noexcept {
        V v{};
        v.struct_size = sizeof v;
        v.userdata = static_cast<Box*>(this);
        v.userdata_free = &free_cb;
        return v;
    }
};

struct transport_box : host_box<transport_box> {
    transport t;
    agentao_broadcaster* bc = nullptr;

    explicit transport_box(transport&& tr) : t(std::move(tr)) {
        if (t.fan_out) bc = agentao_broadcaster_new();
    }
    ~transport_box() { agentao_broadcaster_free(bc); }
    transport_box(const transport_box&) = delete;
    transport_box& operator=(const transport_box&) = delete;

    static void emit_cb(void* ud, const char* event_json) noexcept {
        transport_box* b = of(ud);
        if (b->t.emit) guarded([&] { b->t.emit(view(event_json)); }, [](const char*) {});
        if (b->bc) agentao_broadcaster_notify(b->bc, event_json, nullptr);
    }

    // A callback that threw before answering fails its request with the exception's text.
    static void fail_unanswered(reply& r, const char* slot, const char* what) noexcept {
        if (!r.pending()) return;
        char message[512];
        std::snprintf(message, sizeof message, "the host's %s callback threw: %s", slot, what);
        agentao_reply_fail(r.release(), message, nullptr);
    }

    static void confirm_cb(void* ud, const char* tool_name, const char* description,
                           const char* args_json, const char* call_id, agentao_reply* raw) noexcept {
        transport_box* b = of(ud);
        reply r(raw);
        tool_confirmation call{view(tool_name), view(description), view(args_json), view(call_id)};
        guarded([&] { b->t.confirm_tool(call, std::move(r)); },
                [&](const char* what) { fail_unanswered(r, "confirm_tool", what); });
    }

    static void ask_cb(void* ud, const char* question, const char* hints_json,
                       agentao_reply* raw) noexcept {
        transport_box* b = of(ud);
        reply r(raw);
        guarded([&] { b->t.ask_user(view(question), view(hints_json), std::move(r)); },
                [&](const char* what) { fail_unanswered(r, "ask_user", what); });
    }

    static void max_iter_cb(void* ud, uint32_t count, const char* pending_calls_json,
                            agentao_reply* raw) noexcept {
        transport_box* b = of(ud);
        reply r(raw);
        guarded([&] { b->t.on_max_iterations(count, view(pending_calls_json), std::move(r)); },
                [&](const char* what) { fail_unanswered(r, "on_max_iterations", what); });
    }

    static agentao_status subscribe_cb(void* ud, agentao_listener_fn listener, void* listener_ud,
                                       uint64_t* out) noexcept {
        return agentao_broadcaster_subscribe(of(ud)->bc, listener, listener_ud, out);
    }
    static void unsubscribe_cb(void* ud, uint64_t sub) noexcept {
        agentao_broadcaster_unsubscribe(of(ud)->bc, sub);
    }

    // The vtable; the library owns the box from here on (userdata_free deletes it).
    agentao_transport vtable() noexcept {
        auto v = vtable_header<agentao_transport>();
        if (t.emit || bc) v.emit = &emit_cb;
        if (t.confirm_tool) v.confirm_tool = &confirm_cb;
        if (t.ask_user) v.ask_user = &ask_cb;
        if (t.on_max_iterations) v.on_max_iterations = &max_iter_cb;
        if (bc) {
            v.subscribe = &subscribe_cb;
            v.unsubscribe = &unsubscribe_cb;
        }
        return v;
    }
};

// Appends code point `cp` to `out` as UTF-8.
inline void put_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

// Four hex digits at `p` (nullopt when they are not).
inline std::optional<uint32_t> hex4(std::string_view s, size_t p) {
    if (p + 4 > s.size()) return std::nullopt;
    uint32_t v = 0;
    for (size_t i = p; i < p + 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
        else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
        else return std::nullopt;
    }
    return v;
}

// The text of a delta item, `{"type":"text_delta","text":"..."}` as the library writes it
// (one flat object, the string JSON-escaped): so a host gets text, as in Go and Swift, without
// a JSON parser. Anything it cannot read yields nullopt.
inline std::optional<std::string> delta_text(std::string_view json) {
    constexpr std::string_view key = "\"text\":\"";
    size_t p = json.find(key);
    if (p == std::string_view::npos) return std::nullopt;
    std::string out;
    for (p += key.size(); p < json.size(); p++) {
        char c = json[p];
        if (c == '"') return out;
        if (c != '\\') {
            out += c;
            continue;
        }
        if (++p >= json.size()) return std::nullopt;
        switch (json[p]) {
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case '/': out += '/'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u': {
                auto cp = hex4(json, p + 1);
                if (!cp) return std::nullopt;
                p += 4;
                if (*cp >= 0xD800 && *cp < 0xDC00 && p + 2 < json.size() && json[p + 1] == '\\' &&
                    json[p + 2] == 'u') {
                    auto lo = hex4(json, p + 3);
                    if (lo && *lo >= 0xDC00 && *lo < 0xE000) {
                        *cp = 0x10000 + ((*cp - 0xD800) << 10) + (*lo - 0xDC00);
                        p += 6;
                    }
                }
                put_utf8(out, *cp);
                break;
            }
            default: return std::nullopt;
        }
    }
    return std::nullopt;
}

struct turn_box {
    std::function<void(std::string_view)> on_delta;
    std::function<void(turn_result)> on_done;
    // Whether on_delta takes the item's JSON (stream_json) rather than its text (stream).
    bool delta_json = false;

    static void delta_cb(void* ud, const char* delta_json) noexcept {
        auto* b = static_cast<turn_box*>(ud);
        if (!b->on_delta) return;
        guarded(
            [&] {
                if (b->delta_json) {
                    b->on_delta(view(delta_json));
                } else if (auto text = delta_text(view(delta_json))) {
                    b->on_delta(*text);
                }
            },
            [](const char*) {});
    }
    // Called exactly once per accepted turn: the last use of the box.
    static void done_cb(void* ud, agentao_status st, const char* outcome_json,
                        const agentao_error* err) noexcept {
        auto* b = static_cast<turn_box*>(ud);
        guarded(
            [&] {
                turn_result r;
                r.code = static_cast<status>(st);
                if (outcome_json) r.outcome_json = outcome_json;
                if (err) r.message = agentao_error_message(err);
                if (b->on_done) b->on_done(std::move(r));
            },
            [](const char*) {});
        delete b;
    }
};

struct observer_box : host_box<observer_box> {
    std::function<void(std::string_view)> fn;
    static void event_cb(void* ud, const char* event_json) noexcept {
        auto* b = static_cast<observer_box*>(ud);
        guarded([&] { b->fn(view(event_json)); }, [](const char*) {});
    }
};

// A pull: the item, std::nullopt once the stream is closed, or the error.
template <class F>
result<std::optional<std::string>> pull(F&& f) {
    char* out = nullptr;
    agentao_error* err = nullptr;
    agentao_status st = f(&out, &err);
    if (st == AGENTAO_STATUS_OK) {
        agentao_error_free(err);
        return std::optional<std::string>(take_string(out));
    }
    agentao_string_free(out);
    if (st == AGENTAO_STATUS_CLOSED) {
        agentao_error_free(err);
        return std::optional<std::string>();
    }
    return take_error(st, err);
}

}  // namespace detail

/// A streaming turn read by pulling (agentao_stream): text deltas, then the TurnOutcome.
/// Destroying it closes it and cancels the turn if it still runs.
class stream {
public:
    stream() noexcept = default;
    /// The next item (`{"type":"text_delta",...}` or the final `{"type":"turn_outcome",...}`),
    /// std::nullopt after the last one, or the error: status::timeout when nothing came in
    /// time, or how the turn ended (status::cancelled, status::host_error, ...).
    result<std::optional<std::string>> try_next(std::chrono::milliseconds timeout = wait_forever) {
        return detail::pull([&](char** out, agentao_error** e) {
            return agentao_stream_next(h_.get(), detail::to_ms(timeout), out, e);
        });
    }
#ifndef AGENTAO_NO_EXCEPTIONS
    std::optional<std::string> next(std::chrono::milliseconds timeout = wait_forever) {
        return try_next(timeout).value();
    }
#endif
    agentao_stream* get() const noexcept { return h_.get(); }

private:
    friend class agent;
    explicit stream(agentao_stream* raw) noexcept : h_(raw) {}
    detail::handle<agentao_stream, agentao_stream_free> h_;
};

/// A pull stream of an agent's host events (v3 JSON). Destroying it closes it.
class host_event_stream {
public:
    host_event_stream() noexcept = default;
    /// The next event, or the error (status::timeout when none came in time).
    result<std::optional<std::string>> try_next(std::chrono::milliseconds timeout = wait_forever) {
        return detail::pull([&](char** out, agentao_error** e) {
            return agentao_host_event_stream_next(h_.get(), detail::to_ms(timeout), out, e);
        });
    }
#ifndef AGENTAO_NO_EXCEPTIONS
    std::optional<std::string> next(std::chrono::milliseconds timeout = wait_forever) {
        return try_next(timeout).value();
    }
#endif
    /// Wakes a `next` waiting on another thread (it returns status::closed, as every later
    /// call does) and lets a turn blocked on the full stream go on; destroy the stream after
    /// that thread is done with it.
    void close() const noexcept { agentao_host_event_stream_close(h_.get()); }
    agentao_host_event_stream* get() const noexcept { return h_.get(); }

private:
    friend class agent;
    explicit host_event_stream(agentao_host_event_stream* raw) noexcept : h_(raw) {}
    detail::handle<agentao_host_event_stream, agentao_host_event_stream_free> h_;
};

// ---- host tools (agentao_agent_add_tool) ----------------------------------------------------

/// What the model sees of a host tool, and how the agent treats it (agentao_tool_desc).
struct tool_spec {
    std::string name;
    std::string description;
    /// The arguments' JSON Schema: a JSON object, sent to the model verbatim.
    std::string parameters_json = R"({"type":"object","properties":{}})";
    /// Admitted in read-only mode, and eligible for parallel batches.
    bool read_only = false;
    /// When no rule decides the call, ask the transport's confirm_tool first.
    bool requires_confirmation = false;
    /// Sub-agents receive the tool too.
    bool copies_to_subagents = false;
    /// Two calls of this tool in one batch may run at the same time.
    bool reentrant = false;
};

/// Thrown by a tool handler to choose the error type the host event reports (any other
/// exception is reported as HostToolError with its what()).
class tool_error : public std::runtime_error {
public:
    tool_error(std::string type, const std::string& message)
        : std::runtime_error(message), type_(std::move(type)) {}
    const std::string& type() const noexcept { return type_; }

private:
    std::string type_;
};

/// One running call of a host tool (agentao_tool_call): borrowed from the library, valid
/// until its tool_reply is answered (or destroyed). Usable from any thread.
class tool_call {
public:
    explicit tool_call(const agentao_tool_call* raw) noexcept : raw_(raw) {}
    /// The model's tool_call_id.
    std::string_view id() const noexcept { return detail::view(agentao_tool_call_id(raw_)); }
    /// Whether the turn was cancelled: the call is then over and a later answer is ignored.
    bool cancelled() const noexcept {
        return agentao_cancel_token_is_cancelled(agentao_tool_call_cancel_token(raw_));
    }
    /// The turn's token, borrowed (never free it).
    const agentao_cancel_token* cancel_token() const noexcept {
        return agentao_tool_call_cancel_token(raw_);
    }
    /// Runs `fn(reason)` once when the call is cancelled (see cancel_watch::try_watch), so a
    /// handler waiting on something else can stop without polling `cancelled()`.
    result<cancel_watch> try_on_cancel(std::function<void(std::string_view reason)> fn) const {
        return cancel_watch::try_watch(cancel_token(), std::move(fn));
    }
#ifndef AGENTAO_NO_EXCEPTIONS
    cancel_watch on_cancel(std::function<void(std::string_view reason)> fn) const {
        return try_on_cancel(std::move(fn)).value();
    }
#endif
    /// Streams a chunk as a tool_output event; status::closed once the call has ended.
    result<void> try_output(std::string_view chunk) const {
        if (auto bad = detail::check_view(chunk, "the chunk")) return *bad;
        std::string c(chunk);
        return detail::call(
            [&](agentao_error** e) { return agentao_tool_call_output(raw_, c.c_str(), e); });
    }
    const agentao_tool_call* get() const noexcept { return raw_; }

private:
    const agentao_tool_call* raw_;
};

/// The pending answer of one host-tool call. Answer it exactly once, from any thread, during
/// the handler or later (move it out to keep it). Destroyed unanswered, it fails the call
/// ("the host dropped the tool call without answering"), so a forgotten reply never leaves a
/// turn waiting. An answer after the turn was cancelled is ignored by the library.
class tool_reply : public detail::pending_answer<detail::tool_reply_traits> {
public:
    using pending_answer::pending_answer;

    /// The call's result: the model reads `text` and the call completes ok.
    /// A text with a NUL byte is refused (status::invalid_argument) and the call fails with
    /// that message instead (the model would read it cut short).
    result<void> try_answer(std::string_view text) {
        return answer_text(text, "the tool result", agentao_reply_tool_result);
    }
    /// The call's failure: the model reads `Error executing <name>: <message>`; the host
    /// event's error_type is `type` ("" means HostToolError). A NUL byte in either is refused
    /// as in try_answer.
    result<void> try_fail(std::string_view type, std::string_view message) {
        agentao_reply* r = take();
        if (!r) return answered();
        if (auto bad = detail::check_view(type, "the error type")) return refuse(r, std::move(*bad));
        if (auto bad = detail::check_view(message, "the error message")) return refuse(r, std::move(*bad));
        std::string ty(type), m(message);
        return detail::call([&](agentao_error** e) {
            return agentao_reply_tool_error(r, ty.empty() ? nullptr : ty.c_str(), m.c_str(), e);
        });
    }
#ifndef AGENTAO_NO_EXCEPTIONS
    void answer(std::string_view text) { try_answer(text).value(); }
    void fail(std::string_view type, std::string_view message) { try_fail(type, message).value(); }
#endif
};

/// A synchronous tool handler: the returned text is the result; a thrown exception becomes
/// the call's error (tool_error chooses its type). Runs on a library thread.
using tool_fn = std::function<std::string(std::string_view args_json, const tool_call& call)>;
/// An asynchronous tool handler: answer `reply` now or later, from any thread (move it out
/// to keep it); `call` stays valid until then. An exception thrown while the reply is still
/// unanswered and not moved out fails the call with the exception's message.
using async_tool_fn = std::function<void(std::string_view args_json, tool_call call, tool_reply&& reply)>;

/// What started a compaction.
enum class compaction_trigger : int32_t {
    automatic = AGENTAO_COMPACTION_TRIGGER_AUTO,
    overflow = AGENTAO_COMPACTION_TRIGGER_OVERFLOW,
    manual = AGENTAO_COMPACTION_TRIGGER_MANUAL,
};

/// What a compaction does.
enum class compaction_kind : int32_t {
    full = AGENTAO_COMPACTION_KIND_FULL,
    minimal = AGENTAO_COMPACTION_KIND_MINIMAL,
};

/// One full compaction a controller is asked about; the views are valid during the callback
/// only (docs/context-compaction.md).
struct compaction_request {
    compaction_trigger trigger;
    compaction_kind kind;
    std::string_view reason;
    uint64_t estimated_tokens;
    uint64_t window;
    uint64_t messages_to_summarize;
    uint64_t messages_kept;
    /// The messages the summary replaces (a JSON array, the history's format).
    std::string_view messages_json;
    /// Set when a foreground sub-agent compacts.
    std::optional<std::string_view> child_task_id;
};

/// The pending answer of a compaction controller. Answer it exactly once, from any thread,
/// during the callback or later (move it out to keep it). Destroyed unanswered, it fails the
/// request, which cancels the compaction.
class compaction_reply : public detail::pending_answer<detail::reply_traits> {
public:
    using pending_answer::pending_answer;

    /// The library summarises, as without a controller.
    result<void> try_allow() { return answer(agentao_reply_compaction_allow); }
    /// No compaction; `reason` goes into compaction_settled's detail.
    result<void> try_cancel(std::optional<std::string_view> reason = std::nullopt) {
        if (!reason)
            return answer([](agentao_reply* r, agentao_error** e) { return agentao_reply_compaction_cancel(r, nullptr, e); });
        return answer_text(*reason, "the reason", agentao_reply_compaction_cancel);
    }
    /// `text` is the summary (no model is called).
    result<void> try_summary(std::string_view text) {
        return answer_text(text, "the summary", agentao_reply_compaction_summary);
    }
    /// Fails the request: the compaction is cancelled, the detail says why.
    result<void> try_fail(std::string_view message) {
        return answer_text(message, "the failure message", agentao_reply_fail);
    }
#ifndef AGENTAO_NO_EXCEPTIONS
    void allow() { try_allow().value(); }
    void cancel(std::optional<std::string_view> reason = std::nullopt) { try_cancel(reason).value(); }
    void summary(std::string_view text) { try_summary(text).value(); }
    void fail(std::string_view message) { try_fail(message).value(); }
#endif
};

/// A compaction controller: asked before every full compaction, on a library thread; answer
/// `reply` now or later. An exception thrown while the reply is still unanswered and not moved
/// out fails it (the compaction is cancelled).
using compaction_controller =
    std::function<void(const compaction_request& request, compaction_reply&& reply)>;

/// A point of the agent loop where hooks run (Claude Code's hook event names; docs/hooks.md).
enum class hook_event : int32_t {
    pre_tool_use = AGENTAO_HOOK_EVENT_PRE_TOOL_USE,
    post_tool_use = AGENTAO_HOOK_EVENT_POST_TOOL_USE,
    post_tool_use_failure = AGENTAO_HOOK_EVENT_POST_TOOL_USE_FAILURE,
    user_prompt_submit = AGENTAO_HOOK_EVENT_USER_PROMPT_SUBMIT,
    stop = AGENTAO_HOOK_EVENT_STOP,
    session_start = AGENTAO_HOOK_EVENT_SESSION_START,
    pre_compact = AGENTAO_HOOK_EVENT_PRE_COMPACT,
};

/// One hook point the host is asked about; the views are valid during the callback only.
struct hook_request {
    hook_event event;
    /// Set at the tool points.
    std::optional<std::string_view> tool_name;
    std::optional<std::string_view> call_id;
    /// What a command hook reads on stdin (Claude Code's format).
    std::string_view input_json;
};

/// The pending answer of a hook. Answer it exactly once, from any thread, during the callback
/// or later (move it out to keep it), with the JSON a command hook prints. Destroyed
/// unanswered, it fails the request, which at pre_tool_use denies the call.
class hook_reply : public detail::pending_answer<detail::reply_traits> {
public:
    using pending_answer::pending_answer;

    /// `output_json`: a JSON object in Claude Code's hook output format; empty: no opinion.
    /// Output that is not the protocol is refused (status::invalid_argument) and fails the
    /// request.
    result<void> try_output(std::string_view output_json) {
        return answer_text(output_json, "the hook output", agentao_reply_hook);
    }
    /// Fails the request: at pre_tool_use the call is denied; elsewhere it is ignored.
    result<void> try_fail(std::string_view message) {
        return answer_text(message, "the failure message", agentao_reply_fail);
    }
#ifndef AGENTAO_NO_EXCEPTIONS
    void output(std::string_view output_json) { try_output(output_json).value(); }
    void fail(std::string_view message) { try_fail(message).value(); }
#endif
};

/// The host's hooks: asked at every hook point on a library thread, after the config's command
/// hooks; answer `reply` now or later. An exception thrown while the reply is still unanswered
/// and not moved out fails it (at pre_tool_use the call is denied).
using hooks_fn = std::function<void(const hook_request& request, hook_reply&& reply)>;

// ---- capabilities ----------------------------------------------------------------------------

/// What a path is, in a file-system answer.
enum class fs_kind : int32_t {
    other = AGENTAO_FS_KIND_OTHER,
    file = AGENTAO_FS_KIND_FILE,
    dir = AGENTAO_FS_KIND_DIR,
};

/// Where a file-system callback puts its answer (agentao_fs_out): valid during the callback.
class fs_answer {
public:
    explicit fs_answer(agentao_fs_out* raw) noexcept : raw_(raw) {}
    /// Answers read (at most the max_bytes asked for).
    result<void> try_set_data(std::string_view bytes) {
        return detail::call([&](agentao_error** e) {
            return agentao_fs_out_set_data(raw_, reinterpret_cast<const uint8_t*>(bytes.data()),
                                           bytes.size(), e);
        });
    }
    /// Adds one entry to a list_dir answer (a name, not a path).
    result<void> try_add_entry(std::string_view name, fs_kind kind, uint64_t size = 0) {
        if (auto bad = detail::check_view(name, "the entry name")) return *bad;
        std::string n(name);
        return detail::call([&](agentao_error** e) {
            return agentao_fs_out_add_entry(raw_, n.c_str(), static_cast<int32_t>(kind), size, e);
        });
    }
    /// Adds one absolute path to a walk answer.
    result<void> try_add_path(std::string_view path, fs_kind kind) {
        if (auto bad = detail::check_view(path, "the path")) return *bad;
        std::string p(path);
        return detail::call([&](agentao_error** e) {
            return agentao_fs_out_add_path(raw_, p.c_str(), static_cast<int32_t>(kind), e);
        });
    }
    /// Answers stat: size in bytes, mtime in seconds since the epoch.
    result<void> try_set_stat(uint64_t size, double mtime, fs_kind kind) {
        return detail::call([&](agentao_error** e) {
            return agentao_fs_out_set_stat(raw_, size, mtime, static_cast<int32_t>(kind), e);
        });
    }

private:
    agentao_fs_out* raw_;
};

/// A host file system (agentao_file_system). Each slot returns 0 or a positive errno value
/// (ENOENT, EISDIR, ...); an empty slot falls back to the local disk for that operation. A
/// slot that throws answers EIO. Slots run on library threads, several at once.
struct file_system {
    std::function<int(std::string_view path, uint64_t max_bytes, fs_answer& out)> read;
    std::function<int(std::string_view path, std::string_view data, bool append)> write;
    std::function<int(std::string_view path, fs_answer& out)> list_dir;
    /// Every descendant of `base` down to `max_depth` levels (negative: no limit).
    std::function<int(std::string_view base, int32_t max_depth, fs_answer& out)> walk;
    std::function<int(std::string_view path, fs_answer& out)> stat;
    std::function<bool(std::string_view path)> exists;
};

/// Which output stream a shell chunk comes from.
enum class shell_stream : int32_t { out = AGENTAO_SHELL_STREAM_STDOUT, err = AGENTAO_SHELL_STREAM_STDERR };

/// One command for a shell executor; the views are valid during the callback only.
struct shell_request {
    std::string_view command;
    std::string_view cwd;
    /// `NAME=value` strings.
    std::vector<std::string_view> env;
    std::chrono::milliseconds timeout{0};
    /// Cancelled when the turn is, or the library stops the run (borrowed: valid until the
    /// run is answered).
    const agentao_cancel_token* cancel = nullptr;
    bool cancelled() const noexcept { return agentao_cancel_token_is_cancelled(cancel); }
    /// Runs `fn(reason)` once when the run is cancelled (see cancel_watch::try_watch): stop
    /// the process from there rather than polling `cancelled()`.
    result<cancel_watch> try_on_cancel(std::function<void(std::string_view reason)> fn) const {
        return cancel_watch::try_watch(cancel, std::move(fn));
    }
#ifndef AGENTAO_NO_EXCEPTIONS
    cancel_watch on_cancel(std::function<void(std::string_view reason)> fn) const {
        return try_on_cancel(std::move(fn)).value();
    }
#endif
};

/// One run handed to a shell executor (agentao_shell_run): stream output, then answer once
/// with finish (or started, for a background run) or fail, from any thread (move it out of
/// the callback to answer later). Destroyed unanswered, it fails the run.
class shell_run : public detail::pending_answer<detail::shell_run_traits> {
public:
    using pending_answer::pending_answer;

    result<void> try_output(shell_stream s, std::string_view bytes) {
        agentao_shell_run* r = peek();
        if (!r) return answered();
        return detail::call([&](agentao_error** e) {
            return agentao_shell_run_output(r, static_cast<int32_t>(s),
                                            reinterpret_cast<const uint8_t*>(bytes.data()),
                                            bytes.size(), e);
        });
    }
    /// The command ended with `returncode` (negative: killed by that signal).
    result<void> try_finish(int32_t returncode, bool timed_out = false, bool cancelled = false) {
        return answer([&](agentao_shell_run* r, agentao_error** e) {
            return agentao_shell_run_finish(r, returncode, timed_out, cancelled, e);
        });
    }
    /// A background command started as `pid` in process group `pgid` (negative: none).
    result<void> try_started(int64_t pid, int64_t pgid = -1) {
        return answer([&](agentao_shell_run* r, agentao_error** e) { return agentao_shell_run_started(r, pid, pgid, e); });
    }
    /// The command could not start: `Error starting command: <message>`.
    result<void> try_fail(std::string_view message) {
        return answer_text(message, "the failure message", agentao_shell_run_fail);
    }
};

/// A host shell executor (agentao_shell_executor, POSIX dialect). `run` is required;
/// an empty `run_background` refuses background commands. A callback that throws before
/// answering fails the run with the exception's message.
struct shell_executor {
    std::function<void(const shell_request& request, shell_run&& run)> run;
    std::function<void(const shell_request& request, shell_run&& run)> run_background;
    /// The interpreter commands run with (`<interpreter> -c <command>`; empty: `sh`).
    std::string interpreter;
};

/// A host memory store (agentao_memory_store). Records and lists are JSON (see
/// agentao.h); a callback that throws fails that operation with the exception's message
/// (save_memory then reports `Error saving memory: <message>`). `upsert` and `list` are
/// required; `get` and `search` may be empty. Never two calls of one agent at once.
struct memory_store {
    std::function<void(std::string_view record_json)> upsert;
    /// The live records of `scope` (nullopt: both) as a JSON array, newest first.
    std::function<std::string(std::optional<std::string_view> scope)> list;
    /// The live record with `scope` and `key`, or "null".
    std::function<std::string(std::string_view scope, std::string_view key)> get;
    /// The records relevant to `query` as a JSON array.
    std::function<std::string(std::string_view query, std::optional<std::string_view> scope)> search;
};

/// An MCP registry: `list_servers` returns the servers as a JSON object
/// `{"<name>": {<server config>}}`, or nullopt for none. Called before each turn, on a library
/// thread; a throw counts as nullopt.
using mcp_registry_fn = std::function<std::optional<std::string>()>;

namespace detail {

struct tool_box : host_box<tool_box> {
    async_tool_fn fn;
    static void execute_cb(void* ud, const char* args_json, const agentao_tool_call* call,
                           agentao_reply* raw) noexcept {
        auto* b = static_cast<tool_box*>(ud);
        tool_reply r(raw);
        guarded([&] { b->fn(view(args_json), tool_call(call), std::move(r)); },
                [&](const char* what) {
                    if (r.pending()) (void)r.try_fail("", std::string("the host tool threw: ") + what);
                });
    }
    static async_tool_fn wrap(tool_fn fn) {
        return [fn = std::move(fn)](std::string_view args, tool_call call, tool_reply&& reply) {
#if AGENTAO_DETAIL_CAN_CATCH
            try {
                std::string text = fn(args, call);
                (void)reply.try_answer(text);
            } catch (const tool_error& e) {
                (void)reply.try_fail(e.type(), e.what());
            } catch (const std::exception& e) {
                (void)reply.try_fail("", e.what());
            } catch (...) {
                (void)reply.try_fail("", "an exception that is not a std::exception");
            }
#else
            (void)reply.try_answer(fn(args, call));
#endif
        };
    }
};

struct fs_box : host_box<fs_box> {
    file_system fs;
    template <class F>
    static int32_t run(F&& f) noexcept {
        int32_t rc = 5;  // EIO, when the slot throws
        guarded([&] { rc = f(); }, [](const char*) {});
        return rc;
    }
    static int32_t read_cb(void* ud, const char* path, uint64_t max_bytes, agentao_fs_out* out) noexcept {
        return run([&] { fs_answer a(out); return of(ud)->fs.read(view(path), max_bytes, a); });
    }
    static int32_t write_cb(void* ud, const char* path, const uint8_t* data, size_t len, bool append) noexcept {
        return run([&] {
            std::string_view d(reinterpret_cast<const char*>(data), data ? len : 0);
            return of(ud)->fs.write(view(path), d, append);
        });
    }
    static int32_t list_cb(void* ud, const char* path, agentao_fs_out* out) noexcept {
        return run([&] { fs_answer a(out); return of(ud)->fs.list_dir(view(path), a); });
    }
    static int32_t walk_cb(void* ud, const char* base, int32_t depth, agentao_fs_out* out) noexcept {
        return run([&] { fs_answer a(out); return of(ud)->fs.walk(view(base), depth, a); });
    }
    static int32_t stat_cb(void* ud, const char* path, agentao_fs_out* out) noexcept {
        return run([&] { fs_answer a(out); return of(ud)->fs.stat(view(path), a); });
    }
    static bool exists_cb(void* ud, const char* path) noexcept {
        bool yes = false;
        guarded([&] { yes = of(ud)->fs.exists(view(path)); }, [](const char*) {});
        return yes;
    }
    agentao_file_system vtable() noexcept {
        auto v = vtable_header<agentao_file_system>();
        if (fs.read) v.read = &read_cb;
        if (fs.write) v.write = &write_cb;
        if (fs.list_dir) v.list_dir = &list_cb;
        if (fs.walk) v.walk = &walk_cb;
        if (fs.stat) v.stat = &stat_cb;
        if (fs.exists) v.exists = &exists_cb;
        return v;
    }
};

struct shell_box : host_box<shell_box> {
    shell_executor sh;
    static void dispatch(const std::function<void(const shell_request&, shell_run&&)>& fn,
                         const agentao_shell_request* req, agentao_shell_run* raw) noexcept {
        shell_run r(raw);
        guarded(
            [&] {
                shell_request q;
                q.command = view(req->command);
                q.cwd = view(req->cwd);
                for (size_t i = 0; i < req->env_len; i++) q.env.push_back(view(req->env[i]));
                q.timeout = std::chrono::milliseconds(req->timeout_ms);
                q.cancel = req->cancel;
                fn(q, std::move(r));
            },
            [&](const char* what) {
                if (r.pending()) (void)r.try_fail(std::string("the host executor threw: ") + what);
            });
    }
    static void run_cb(void* ud, const agentao_shell_request* req, agentao_shell_run* raw) noexcept {
        dispatch(of(ud)->sh.run, req, raw);
    }
    static void bg_cb(void* ud, const agentao_shell_request* req, agentao_shell_run* raw) noexcept {
        dispatch(of(ud)->sh.run_background, req, raw);
    }
    agentao_shell_executor vtable() noexcept {
        auto v = vtable_header<agentao_shell_executor>();
        v.dialect = AGENTAO_SHELL_DIALECT_POSIX;
        v.interpreter = sh.interpreter.empty() ? nullptr : sh.interpreter.c_str();
        if (sh.run) v.run = &run_cb;
        if (sh.run_background) v.run_background = &bg_cb;
        return v;
    }
};

struct memory_box : host_box<memory_box> {
    memory_store m;
    static std::optional<std::string_view> opt(const char* s) noexcept {
        return s ? std::optional<std::string_view>(s) : std::nullopt;
    }
    template <class F>
    static void answer(agentao_memory_answer* ans, F&& f) noexcept {
        guarded(
            [&] {
                std::optional<std::string> json = f();
                if (json) agentao_memory_answer_json(ans, json->c_str(), nullptr);
            },
            [&](const char* what) { agentao_memory_answer_fail(ans, what, nullptr); });
    }
    static void upsert_cb(void* ud, const char* record, agentao_memory_answer* ans) noexcept {
        answer(ans, [&] { of(ud)->m.upsert(view(record)); return std::optional<std::string>(); });
    }
    static void list_cb(void* ud, const char* scope, agentao_memory_answer* ans) noexcept {
        answer(ans, [&] { return std::optional<std::string>(of(ud)->m.list(opt(scope))); });
    }
    static void get_cb(void* ud, const char* scope, const char* key, agentao_memory_answer* ans) noexcept {
        answer(ans, [&] { return std::optional<std::string>(of(ud)->m.get(view(scope), view(key))); });
    }
    static void search_cb(void* ud, const char* query, const char* scope, agentao_memory_answer* ans) noexcept {
        answer(ans, [&] { return std::optional<std::string>(of(ud)->m.search(view(query), opt(scope))); });
    }
    agentao_memory_store vtable() noexcept {
        auto v = vtable_header<agentao_memory_store>();
        if (m.upsert) v.upsert = &upsert_cb;
        if (m.list) v.list = &list_cb;
        if (m.get) v.get = &get_cb;
        if (m.search) v.search = &search_cb;
        return v;
    }
};

struct compaction_box : host_box<compaction_box> {
    compaction_controller fn;
    static void decide_cb(void* ud, const agentao_compaction_request* req, agentao_reply* raw) noexcept {
        compaction_reply r(raw);
        guarded(
            [&] {
                compaction_request q{static_cast<compaction_trigger>(req->trigger),
                                     static_cast<compaction_kind>(req->kind),
                                     view(req->reason),
                                     req->estimated_tokens,
                                     req->window,
                                     req->messages_to_summarize,
                                     req->messages_kept,
                                     view(req->messages_json),
                                     req->child_task_id ? std::optional<std::string_view>(req->child_task_id)
                                                        : std::nullopt};
                of(ud)->fn(q, std::move(r));
            },
            [&](const char* what) {
                if (r.pending()) (void)r.try_fail(std::string("the compaction controller threw: ") + what);
            });
    }
    agentao_compaction_controller vtable() noexcept {
        auto v = vtable_header<agentao_compaction_controller>();
        v.decide = &decide_cb;
        return v;
    }
};

struct hooks_box : host_box<hooks_box> {
    hooks_fn fn;
    static void hook_cb(void* ud, const agentao_hook_request* req, agentao_reply* raw) noexcept {
        hook_reply r(raw);
        guarded(
            [&] {
                hook_request q{static_cast<hook_event>(req->event),
                               req->tool_name ? std::optional<std::string_view>(req->tool_name) : std::nullopt,
                               req->call_id ? std::optional<std::string_view>(req->call_id) : std::nullopt,
                               view(req->input_json)};
                of(ud)->fn(q, std::move(r));
            },
            [&](const char* what) {
                if (r.pending()) (void)r.try_fail(std::string("the hooks threw: ") + what);
            });
    }
    agentao_hooks vtable() noexcept {
        auto v = vtable_header<agentao_hooks>();
        v.on_hook = &hook_cb;
        return v;
    }
};

struct registry_box : host_box<registry_box> {
    mcp_registry_fn fn;
    // The string goes back to release_cb once the library copied it.
    static const char* list_cb(void* ud) noexcept {
        char* out = nullptr;
        guarded(
            [&] {
                if (std::optional<std::string> s = of(ud)->fn()) {
                    out = new char[s->size() + 1];
                    std::copy(s->c_str(), s->c_str() + s->size() + 1, out);
                }
            },
            [](const char*) {});
        return out;
    }
    static void release_cb(void*, const char* s) noexcept { delete[] s; }
    agentao_mcp_registry vtable() noexcept {
        auto v = vtable_header<agentao_mcp_registry>();
        v.list_servers = &list_cb;
        v.release_servers = &release_cb;
        return v;
    }
};

}  // namespace detail

/// A fan-out of event JSON to listeners (agentao_broadcaster), e.g. for a host's own
/// transport. Move-only; destroying it releases every listener. Thread-safe.
class broadcaster {
public:
    broadcaster() : h_(agentao_broadcaster_new()) {}

    /// Adds a listener (called on the notifying thread, in registration order; an exception
    /// it throws is dropped). The broadcaster owns it: it is destroyed after its last call,
    /// when unsubscribed or when the broadcaster goes.
    result<uint64_t> try_subscribe(std::function<void(std::string_view event_json)> fn) {
        if (!fn) return agentao::error(status::null_argument, "the listener is empty");
        // subscribe_with_free owns the box from here, and frees it itself on failure.
        auto* box = new detail::observer_box{{}, std::move(fn)};
        uint64_t id = 0;
        result<void> r = detail::call([&](agentao_error** e) {
            return agentao_broadcaster_subscribe_with_free(h_.get(), &detail::observer_box::event_cb, box,
                                                           &detail::observer_box::free_cb, &id, e);
        });
        if (!r) return r.error();
        return id;
    }
    /// Removes a listener; idempotent.
    void unsubscribe(uint64_t id) noexcept { agentao_broadcaster_unsubscribe(h_.get(), id); }
    /// Delivers `event_json` to every listener on this thread.
    result<void> try_notify(std::string_view event_json) const {
        if (auto bad = detail::check_view(event_json, "the event")) return *bad;
        std::string e(event_json);
        return detail::call([&](agentao_error** err) { return agentao_broadcaster_notify(h_.get(), e.c_str(), err); });
    }
#ifndef AGENTAO_NO_EXCEPTIONS
    uint64_t subscribe(std::function<void(std::string_view)> fn) { return try_subscribe(std::move(fn)).value(); }
    void notify(std::string_view event_json) const { try_notify(event_json).value(); }
#endif
    agentao_broadcaster* get() const noexcept { return h_.get(); }

private:
    detail::handle<agentao_broadcaster, agentao_broadcaster_free> h_;
};

/// The id of a host-event observer.
using observer_id = uint64_t;

/// An agent (agentao_agent): one session with its history, tools, permissions and
/// transport. Thread-safe; one turn at a time. Destroying it cancels a running turn
/// ("session-closed"), whose completion still fires.
class agent {
public:
    /// An agent with the built-in null transport.
    static result<agent> try_create(std::string_view config_json) {
        return create_raw(config_json, nullptr);
    }
    /// An agent talking to `t`.
    static result<agent> try_create(std::string_view config_json, transport t) {
        return create_raw(config_json, &t);
    }

    /// An empty agent (as after a move): calls on it fail with status::null_argument.
    agent() noexcept = default;
    agent(agent&& o) noexcept = default;
    agent& operator=(agent&& o) noexcept = default;

    /// The session id (a UUID).
    std::string session_id() const {
        const char* s = agentao_agent_session_id(h_.get());
        return s ? s : "";
    }

    /// Runs one turn and waits for its answer. A turn that did not end ok fails with its
    /// status (cancelled, host_error, timeout); last_turn() then has the full outcome.
    result<std::string> try_chat(std::string_view message, const turn_options& opts = {}) {
        if (auto bad = detail::check_view(message, "the message")) return *bad;
        std::string m(message);
        std::vector<agentao_image> imgs;
        if (auto bad = images(opts, imgs)) return *bad;
        return detail::call_string([&](char** out, agentao_error** e) {
            if (!imgs.empty())
                return agentao_agent_chat_images(h_.get(), m.c_str(), imgs.data(), imgs.size(),
                                                 opts.max_iterations, token(opts), out, e);
            return agentao_agent_chat(h_.get(), m.c_str(), opts.max_iterations, token(opts), out, e);
        });
    }

    /// Starts one turn and returns at once; `on_done` runs exactly once, on a library
    /// thread, when it ends (not at all when this call fails).
    result<void> try_run(std::string_view message, std::function<void(turn_result)> on_done,
                         const turn_options& opts = {}) {
        return start(message, false, nullptr, std::move(on_done), opts);
    }

    /// Like try_run, and each text delta's text goes to `on_text` first, in order (the
    /// text itself, as Go's and Swift's streams give it; before, it was the item's JSON, which
    /// try_stream_json still gives). Works with any transport (no fan-out needed).
    result<void> try_stream(std::string_view message,
                            std::function<void(std::string_view text)> on_text,
                            std::function<void(turn_result)> on_done,
                            const turn_options& opts = {}) {
        return start(message, true, std::move(on_text), std::move(on_done), opts, false);
    }

    /// Like try_stream, and `on_delta` gets each item's JSON as the C API gives it
    /// (`{"type":"text_delta","text":...}`).
    result<void> try_stream_json(std::string_view message,
                                 std::function<void(std::string_view delta_json)> on_delta,
                                 std::function<void(turn_result)> on_done,
                                 const turn_options& opts = {}) {
        return start(message, true, std::move(on_delta), std::move(on_done), opts, true);
    }

    /// Starts a turn read by pulling (see stream).
    result<agentao::stream> try_stream_open(std::string_view message, const turn_options& opts = {}) {
        if (auto bad = detail::check_view(message, "the message")) return *bad;
        if (opts.images && !opts.images->empty())
            return agentao::error(status::invalid_argument, "stream_open takes no images");
        std::string m(message);
        agentao_stream* raw = nullptr;
        result<void> r = detail::call([&](agentao_error** e) {
            return agentao_agent_stream_open(h_.get(), m.c_str(), opts.max_iterations, token(opts),
                                             &raw, e);
        });
        if (!r) return r.error();
        return agentao::stream(raw);
    }

    /// A pull stream of this agent's host events, of one session or (nullopt) all.
    result<host_event_stream> try_host_events(
        std::optional<std::string_view> session_filter = std::nullopt) {
        std::string f;
        if (session_filter) {
            if (auto bad = detail::check_view(*session_filter, "the session filter")) return *bad;
            f.assign(*session_filter);
        }
        agentao_host_event_stream* raw = nullptr;
        result<void> r = detail::call([&](agentao_error** e) {
            return agentao_agent_host_events_open(h_.get(), session_filter ? f.c_str() : nullptr,
                                                  &raw, e);
        });
        if (!r) return r.error();
        return host_event_stream(raw);
    }

    /// Adds an observer of host events (runs inline, in order, on a library thread).
    result<observer_id> try_add_observer(std::function<void(std::string_view event_json)> fn) {
        if (!fn) return agentao::error(status::null_argument, "the observer is empty");
        // The library owns the box from here: userdata_free deletes it, on failure too.
        auto* box = new detail::observer_box{{}, std::move(fn)};
        uint64_t id = 0;
        result<void> r = detail::call([&](agentao_error** e) {
            return agentao_agent_add_host_event_observer(
                h_.get(), &detail::observer_box::event_cb, box, &detail::observer_box::free_cb, &id, e);
        });
        if (!r) return r.error();
        return id;
    }
    /// Removes an observer; true when it was registered.
    bool remove_observer(observer_id id) noexcept {
        return agentao_agent_remove_host_event_observer(h_.get(), id);
    }

    /// The last turn's TurnOutcome JSON ("null" before the first turn).
    result<std::string> try_last_turn() const {
        return detail::call_string(
            [&](char** out, agentao_error** e) { return agentao_agent_last_turn(h_.get(), out, e); });
    }
    /// The conversation history (a JSON array of chat messages).
    result<std::string> try_history() const {
        return detail::call_string(
            [&](char** out, agentao_error** e) { return agentao_agent_history(h_.get(), out, e); });
    }
    /// Replaces the history (between turns only).
    result<void> try_set_history(std::string_view history_json) {
        if (auto bad = detail::check_view(history_json, "the history")) return *bad;
        std::string h(history_json);
        return detail::call(
            [&](agentao_error** e) { return agentao_agent_set_history(h_.get(), h.c_str(), e); });
    }
    /// The permission snapshot `{"mode", "rules", "loaded_sources"}`.
    result<std::string> try_active_permissions() const {
        return detail::call_string([&](char** out, agentao_error** e) {
            return agentao_agent_active_permissions(h_.get(), out, e);
        });
    }
    /// Switches the permission mode; returns the previous one.
    result<std::string> try_set_permission_mode(std::string_view mode) {
        if (auto bad = detail::check_view(mode, "the mode")) return *bad;
        std::string m(mode);
        return detail::call_string([&](char** out, agentao_error** e) {
            return agentao_agent_set_permission_mode(h_.get(), m.c_str(), out, e);
        });
    }
    /// Injects rules (a JSON list) labelled `injected:<source_name>`; all or nothing.
    result<void> try_add_permission_rules(std::string_view rules_json, std::string_view source_name) {
        if (auto bad = detail::check_view(rules_json, "the rules")) return *bad;
        if (auto bad = detail::check_view(source_name, "the source name")) return *bad;
        std::string r(rules_json), s(source_name);
        return detail::call([&](agentao_error** e) {
            return agentao_agent_add_permission_rules(h_.get(), r.c_str(), s.c_str(), e);
        });
    }
    /// Run-scope allow / deny rules (JSON lists; nullopt for none), source `injected:<name>`
    /// (nullopt: `run-spec`).
    result<void> try_add_run_rules(std::optional<std::string_view> allow_json,
                                   std::optional<std::string_view> deny_json,
                                   std::optional<std::string_view> source_name = std::nullopt) {
        std::string a, d, s;
        for (auto [view, out, what] : {std::make_tuple(allow_json, &a, "the allow rules"),
                                       std::make_tuple(deny_json, &d, "the deny rules"),
                                       std::make_tuple(source_name, &s, "the source name")}) {
            if (!view) continue;
            if (auto bad = detail::check_view(*view, what)) return *bad;
            out->assign(*view);
        }
        return detail::call([&](agentao_error** e) {
            return agentao_agent_add_run_rules(h_.get(), allow_json ? a.c_str() : nullptr,
                                               deny_json ? d.c_str() : nullptr,
                                               source_name ? s.c_str() : nullptr, e);
        });
    }
    /// Adds a source label to the permission snapshot.
    result<void> try_add_permission_source(std::string_view label) {
        if (auto bad = detail::check_view(label, "the label")) return *bad;
        std::string l(label);
        return detail::call([&](agentao_error** e) {
            return agentao_agent_add_permission_source(h_.get(), l.c_str(), e);
        });
    }
    /// The session's token totals (JSON).
    result<std::string> try_usage() const {
        return detail::call_string(
            [&](char** out, agentao_error** e) { return agentao_agent_usage(h_.get(), out, e); });
    }
    /// The context estimate of the next request and its window (JSON, any thread).
    result<std::string> try_context_usage() const {
        return detail::call_string(
            [&](char** out, agentao_error** e) { return agentao_agent_context_usage(h_.get(), out, e); });
    }
    /// Compacts the history now (between turns; blocks): the result JSON's `status` says
    /// `success`, `cancelled`, `failed` or `skipped`. `reason` (nullopt: `manual`) goes into
    /// the events; `cancel` (may be null) cancels the summarizer's call.
    result<std::string> try_compact(std::optional<std::string_view> reason = std::nullopt,
                                    const cancel_token* cancel = nullptr) {
        std::string r;
        if (reason) {
            if (auto bad = detail::check_view(*reason, "the reason")) return *bad;
            r.assign(*reason);
        }
        return detail::call_string([&](char** out, agentao_error** e) {
            return agentao_agent_compact(h_.get(), reason ? r.c_str() : nullptr,
                                         cancel ? cancel->get() : nullptr, out, e);
        });
    }
    /// Asks `fn` before every full compaction (between turns; docs/context-compaction.md).
    result<void> try_set_compaction_controller(compaction_controller fn) {
        if (!fn) return agentao::error(status::null_argument, "the compaction controller is empty");
        return install_capability(agentao_agent_set_compaction_controller,
                                  (new detail::compaction_box{{}, std::move(fn)})->vtable());
    }
    /// Removes the compaction controller.
    result<void> try_set_compaction_controller(std::nullopt_t) {
        return remove_capability(agentao_agent_set_compaction_controller);
    }
    /// Asks `fn` at every hook point, after the config's command hooks (between turns;
    /// docs/hooks.md).
    result<void> try_set_hooks(hooks_fn fn) {
        if (!fn) return agentao::error(status::null_argument, "the hooks function is empty");
        return install_capability(agentao_agent_set_hooks,
                                  (new detail::hooks_box{{}, std::move(fn)})->vtable());
    }
    /// Removes the host's hooks (the config's command hooks still run).
    result<void> try_set_hooks(std::nullopt_t) {
        return remove_capability(agentao_agent_set_hooks);
    }

    /// Registers a host tool whose handler answers synchronously (see tool_fn); from the
    /// next turn on. A name in use is status::invalid_argument unless `replace`.
    result<void> try_add_tool(const tool_spec& spec, tool_fn fn, bool replace = false) {
        if (!fn) return agentao::error(status::null_argument, "the tool handler is empty");
        return add_tool_box(spec, detail::tool_box::wrap(std::move(fn)), replace);
    }
    /// Registers a host tool whose handler answers its tool_reply now or later.
    result<void> try_add_async_tool(const tool_spec& spec, async_tool_fn fn, bool replace = false) {
        if (!fn) return agentao::error(status::null_argument, "the tool handler is empty");
        return add_tool_box(spec, std::move(fn), replace);
    }
    /// Removes a tool (a host tool or a built-in) between turns; true when there was one.
    result<bool> try_remove_tool(std::string_view name) {
        if (auto bad = detail::check_view(name, "the tool name")) return *bad;
        std::string n(name);
        bool removed = false;
        result<void> r = detail::call([&](agentao_error** e) {
            return agentao_agent_remove_tool(h_.get(), n.c_str(), &removed, e);
        });
        if (!r) return r.error();
        return removed;
    }

    /// Serves the file tools from `fs` (right after creation or between turns).
    result<void> try_set_file_system(file_system fs) {
        return install_capability(agentao_agent_set_file_system,
                                  (new detail::fs_box{{}, std::move(fs)})->vtable());
    }
    /// Restores the local file system.
    result<void> try_set_file_system(std::nullopt_t) {
        return remove_capability(agentao_agent_set_file_system);
    }
    /// Runs run_shell_command's commands through `sh` (right after creation or between turns).
    result<void> try_set_shell_executor(shell_executor sh) {
        return install_capability(agentao_agent_set_shell_executor,
                                  (new detail::shell_box{{}, std::move(sh)})->vtable());
    }
    /// Restores the local executor.
    result<void> try_set_shell_executor(std::nullopt_t) {
        return remove_capability(agentao_agent_set_shell_executor);
    }
    /// Keeps the agent's memories in `store` (right after creation or between turns).
    result<void> try_set_memory_store(memory_store store) {
        return install_capability(agentao_agent_set_memory_store,
                                  (new detail::memory_box{{}, std::move(store)})->vtable());
    }
    /// Restores a new, empty in-memory store.
    result<void> try_set_memory_store(std::nullopt_t) {
        return remove_capability(agentao_agent_set_memory_store);
    }
    /// Adds the registry's MCP servers to the config's (asked again before each turn).
    result<void> try_set_mcp_registry(mcp_registry_fn fn) {
        if (!fn) return agentao::error(status::null_argument, "the registry function is empty");
        return install_capability(agentao_agent_set_mcp_registry,
                                  (new detail::registry_box{{}, std::move(fn)})->vtable());
    }
    /// Removes the MCP registry.
    result<void> try_set_mcp_registry(std::nullopt_t) {
        return remove_capability(agentao_agent_set_mcp_registry);
    }
    /// The MCP servers' status JSON (`{"servers": [...], "registry_error"?}`); never waits.
    result<std::string> try_mcp_status() const {
        return detail::call_string(
            [&](char** out, agentao_error** e) { return agentao_agent_mcp_status(h_.get(), out, e); });
    }
    /// The skills report JSON (`{"enabled", "skills": [...], "skipped": [{"path", "name", "kind",
    /// "reason"}], "prompt_chars"?}`; docs/skills.md). The first call finds the skills if no
    /// turn has yet, blocking for the file reads.
    result<std::string> try_skills() const {
        return detail::call_string(
            [&](char** out, agentao_error** e) { return agentao_agent_skills(h_.get(), out, e); });
    }
    /// What the permission pipeline would decide for this call now, as JSON
    /// (`{"outcome": "allow"|"deny"|"prompt", "reason", "source", ...}`); runs nothing.
    result<std::string> try_preflight(std::string_view tool_name, std::string_view args_json) const {
        if (auto bad = detail::check_view(tool_name, "the tool name")) return *bad;
        if (auto bad = detail::check_view(args_json, "the arguments")) return *bad;
        std::string n(tool_name), a(args_json);
        return detail::call_string([&](char** out, agentao_error** e) {
            return agentao_agent_preflight(h_.get(), n.c_str(), a.c_str(), out, e);
        });
    }
    /// Makes every later turn a child of the host's span (a W3C `traceparent`, with its
    /// `tracestate` or nullopt; docs/observability.md). A malformed value is
    /// status::invalid_argument and changes nothing. Any thread, also from a callback.
    result<void> try_set_traceparent(std::string_view traceparent,
                                     std::optional<std::string_view> tracestate = std::nullopt) {
        return traceparent_call(agentao_agent_set_traceparent, traceparent, tracestate);
    }
    /// Forgets the host's traceparent: each later turn starts a trace of its own.
    result<void> try_clear_traceparent() {
        return detail::call(
            [&](agentao_error** e) { return agentao_agent_set_traceparent(h_.get(), nullptr, nullptr, e); });
    }
    /// As try_set_traceparent, for the next turn only (it wins over the agent's once).
    result<void> try_set_turn_traceparent(std::string_view traceparent,
                                          std::optional<std::string_view> tracestate = std::nullopt) {
        return traceparent_call(agentao_agent_set_turn_traceparent, traceparent, tracestate);
    }
    /// Withdraws a traceparent set for the next turn.
    result<void> try_clear_turn_traceparent() {
        return detail::call([&](agentao_error** e) {
            return agentao_agent_set_turn_traceparent(h_.get(), nullptr, nullptr, e);
        });
    }
    /// The trace id (32 lowercase hex digits) of the turn that runs (from inside one of its
    /// callbacks), else of the last turn; empty before the first turn or with no exporter.
    result<std::string> try_trace_id() const {
        return detail::call_string(
            [&](char** out, agentao_error** e) { return agentao_agent_trace_id(h_.get(), out, e); });
    }
    /// The telemetry exporter's status JSON (`{"enabled", "exported_spans", "dropped_spans",
    /// "failed_exports", "last_error"}`; shared by agents with the same telemetry settings).
    result<std::string> try_telemetry_status() const {
        return detail::call_string(
            [&](char** out, agentao_error** e) { return agentao_agent_telemetry_status(h_.get(), out, e); });
    }
    /// Adds (or replaces) a sub-agent definition (JSON, docs/subagents.md), between turns.
    result<void> try_add_subagent(std::string_view definition_json) {
        if (auto bad = detail::check_view(definition_json, "the definition")) return *bad;
        std::string d(definition_json);
        return detail::call([&](agentao_error** e) { return agentao_agent_add_subagent(h_.get(), d.c_str(), e); });
    }

    /// The C handle, still owned by this object (NULL after a move).
    agentao_agent* get() const noexcept { return h_.get(); }

#ifndef AGENTAO_NO_EXCEPTIONS
    static agent create(std::string_view config_json) { return try_create(config_json).value(); }
    static agent create(std::string_view config_json, transport t) {
        return try_create(config_json, std::move(t)).value();
    }
    std::string chat(std::string_view message, const turn_options& opts = {}) {
        return try_chat(message, opts).value();
    }
    void run(std::string_view message, std::function<void(turn_result)> on_done,
             const turn_options& opts = {}) {
        try_run(message, std::move(on_done), opts).value();
    }
    void stream(std::string_view message, std::function<void(std::string_view text)> on_text,
                std::function<void(turn_result)> on_done, const turn_options& opts = {}) {
        try_stream(message, std::move(on_text), std::move(on_done), opts).value();
    }
    void stream_json(std::string_view message,
                     std::function<void(std::string_view delta_json)> on_delta,
                     std::function<void(turn_result)> on_done, const turn_options& opts = {}) {
        try_stream_json(message, std::move(on_delta), std::move(on_done), opts).value();
    }
    agentao::stream stream_open(std::string_view message, const turn_options& opts = {}) {
        return try_stream_open(message, opts).value();
    }
    host_event_stream host_events(std::optional<std::string_view> session_filter = std::nullopt) {
        return try_host_events(session_filter).value();
    }
    observer_id add_observer(std::function<void(std::string_view)> fn) {
        return try_add_observer(std::move(fn)).value();
    }
    std::string last_turn() const { return try_last_turn().value(); }
    std::string history() const { return try_history().value(); }
    void set_history(std::string_view history_json) { try_set_history(history_json).value(); }
    std::string active_permissions() const { return try_active_permissions().value(); }
    std::string set_permission_mode(std::string_view mode) {
        return try_set_permission_mode(mode).value();
    }
    void add_permission_rules(std::string_view rules_json, std::string_view source_name) {
        try_add_permission_rules(rules_json, source_name).value();
    }
    void add_run_rules(std::optional<std::string_view> allow_json,
                       std::optional<std::string_view> deny_json,
                       std::optional<std::string_view> source_name = std::nullopt) {
        try_add_run_rules(allow_json, deny_json, source_name).value();
    }
    void add_permission_source(std::string_view label) { try_add_permission_source(label).value(); }
    std::string usage() const { return try_usage().value(); }
    std::string context_usage() const { return try_context_usage().value(); }
    std::string compact(std::optional<std::string_view> reason = std::nullopt,
                        const cancel_token* cancel = nullptr) {
        return try_compact(reason, cancel).value();
    }
    void set_compaction_controller(compaction_controller fn) {
        try_set_compaction_controller(std::move(fn)).value();
    }
    void set_hooks(hooks_fn fn) { try_set_hooks(std::move(fn)).value(); }
    void add_tool(const tool_spec& spec, tool_fn fn, bool replace = false) {
        try_add_tool(spec, std::move(fn), replace).value();
    }
    void add_async_tool(const tool_spec& spec, async_tool_fn fn, bool replace = false) {
        try_add_async_tool(spec, std::move(fn), replace).value();
    }
    bool remove_tool(std::string_view name) { return try_remove_tool(name).value(); }
    void set_file_system(file_system fs) { try_set_file_system(std::move(fs)).value(); }
    void set_shell_executor(shell_executor sh) { try_set_shell_executor(std::move(sh)).value(); }
    void set_memory_store(memory_store store) { try_set_memory_store(std::move(store)).value(); }
    void set_mcp_registry(mcp_registry_fn fn) { try_set_mcp_registry(std::move(fn)).value(); }
    std::string mcp_status() const { return try_mcp_status().value(); }
    std::string skills() const { return try_skills().value(); }
    std::string preflight(std::string_view tool_name, std::string_view args_json) const {
        return try_preflight(tool_name, args_json).value();
    }
    void set_traceparent(std::string_view traceparent,
                         std::optional<std::string_view> tracestate = std::nullopt) {
        try_set_traceparent(traceparent, tracestate).value();
    }
    void clear_traceparent() { try_clear_traceparent().value(); }
    void set_turn_traceparent(std::string_view traceparent,
                              std::optional<std::string_view> tracestate = std::nullopt) {
        try_set_turn_traceparent(traceparent, tracestate).value();
    }
    void clear_turn_traceparent() { try_clear_turn_traceparent().value(); }
    std::string trace_id() const { return try_trace_id().value(); }
    std::string telemetry_status() const { return try_telemetry_status().value(); }
    void add_subagent(std::string_view definition_json) { try_add_subagent(definition_json).value(); }
#endif

private:
    explicit agent(agentao_agent* raw) noexcept : h_(raw) {}

    // Every capability is installed and removed the one way: the box behind `v` was `new`ed
    // and the library owns it from this call on (its userdata_free deletes it, on failure too).
    template <class Vtable>
    using capability_setter = agentao_status (*)(agentao_agent*, const Vtable*, agentao_error**);
    template <class Vtable>
    result<void> install_capability(capability_setter<Vtable> set, Vtable v) {
        return detail::call([&](agentao_error** e) { return set(h_.get(), &v, e); });
    }
    template <class Vtable>
    result<void> remove_capability(capability_setter<Vtable> set) {
        return detail::call([&](agentao_error** e) { return set(h_.get(), nullptr, e); });
    }

    // The two traceparent setters differ only in the C function they call.
    using traceparent_setter = agentao_status (*)(agentao_agent*, const char*, const char*, agentao_error**);
    result<void> traceparent_call(traceparent_setter set, std::string_view traceparent,
                                  std::optional<std::string_view> tracestate) {
        if (auto bad = detail::check_view(traceparent, "the traceparent")) return *bad;
        std::string p(traceparent), st;
        if (tracestate) {
            if (auto bad = detail::check_view(*tracestate, "the tracestate")) return *bad;
            st.assign(*tracestate);
        }
        return detail::call(
            [&](agentao_error** e) { return set(h_.get(), p.c_str(), tracestate ? st.c_str() : nullptr, e); });
    }

    static const agentao_cancel_token* token(const turn_options& opts) noexcept {
        return opts.cancel ? opts.cancel->get() : nullptr;
    }

    // The C view of opts.images (borrowing them); an error for a MIME type with a NUL byte.
    static std::optional<agentao::error> images(const turn_options& opts, std::vector<agentao_image>& out) {
        if (!opts.images) return std::nullopt;
        for (const image& i : *opts.images) {
            if (auto bad = detail::check_view(i.mime_type, "the image's MIME type")) return bad;
            out.push_back(agentao_image{i.mime_type.c_str(), i.data.data(), i.data.size()});
        }
        return std::nullopt;
    }

    result<void> add_tool_box(const tool_spec& spec, async_tool_fn fn, bool replace) {
        for (auto [v, what] : {std::make_pair(std::string_view(spec.name), "the tool name"),
                               std::make_pair(std::string_view(spec.description), "the description"),
                               std::make_pair(std::string_view(spec.parameters_json), "the schema")})
            if (auto bad = detail::check_view(v, what)) return *bad;
        auto* box = new detail::tool_box{{}, std::move(fn)};
        agentao_tool_desc d{};
        d.struct_size = sizeof d;
        d.name = spec.name.c_str();
        d.description = spec.description.c_str();
        d.parameters_json = spec.parameters_json.c_str();
        d.is_read_only = spec.read_only;
        d.requires_confirmation = spec.requires_confirmation;
        d.copies_to_subagents = spec.copies_to_subagents;
        d.reentrant = spec.reentrant;
        d.userdata = box;
        d.userdata_free = &detail::tool_box::free_cb;
        d.execute = &detail::tool_box::execute_cb;
        // The library owns the box from here: userdata_free deletes it, on failure too.
        return detail::call([&](agentao_error** e) { return agentao_agent_add_tool(h_.get(), &d, replace, e); });
    }

    static result<agent> create_raw(std::string_view config_json, transport* t) {
        if (auto bad = detail::check_view(config_json, "the config")) return *bad;
        std::string c(config_json);
        // From here the library owns the box: userdata_free deletes it, on failure too.
        agentao_transport v{};
        if (t) v = (new detail::transport_box(std::move(*t)))->vtable();
        agentao_agent* raw = nullptr;
        result<void> r = detail::call([&](agentao_error** e) {
            return agentao_agent_new(c.c_str(), t ? &v : nullptr, &raw, e);
        });
        if (!r) return r.error();
        return agent(raw);
    }

    result<void> start(std::string_view message, bool streaming,
                       std::function<void(std::string_view)> on_delta,
                       std::function<void(turn_result)> on_done, const turn_options& opts,
                       bool delta_json = false) {
        if (auto bad = detail::check_view(message, "the message")) return *bad;
        std::string m(message);
        std::vector<agentao_image> imgs;
        if (auto bad = images(opts, imgs)) return *bad;
        auto* box = new detail::turn_box{std::move(on_delta), std::move(on_done), delta_json};
        agentao_error* err = nullptr;
        agentao_status st;
        if (imgs.empty())
            st = streaming ? agentao_agent_stream(h_.get(), m.c_str(), opts.max_iterations, token(opts),
                                                  &detail::turn_box::delta_cb,
                                                  &detail::turn_box::done_cb, box, &err)
                           : agentao_agent_run(h_.get(), m.c_str(), opts.max_iterations, token(opts),
                                               &detail::turn_box::done_cb, box, &err);
        else
            st = streaming ? agentao_agent_stream_images(h_.get(), m.c_str(), imgs.data(), imgs.size(),
                                                         opts.max_iterations, token(opts),
                                                         &detail::turn_box::delta_cb,
                                                         &detail::turn_box::done_cb, box, &err)
                           : agentao_agent_run_images(h_.get(), m.c_str(), imgs.data(), imgs.size(),
                                                      opts.max_iterations, token(opts),
                                                      &detail::turn_box::done_cb, box, &err);
        if (st != AGENTAO_STATUS_OK) {
            // A refused call never fires on_done, so the box is still ours.
            delete box;
            return detail::take_error(st, err);
        }
        agentao_error_free(err);
        return {};
    }

    detail::handle<agentao_agent, agentao_agent_free> h_;
};

}  // namespace agentao

#endif  // AGENTAO_HPP
