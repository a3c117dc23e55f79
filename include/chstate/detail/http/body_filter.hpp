// chstate/detail/http/body_filter.hpp — the body of a reply with status 200
// on its way to the sink, with its last 16 KiB held back.
//
// An old server (before 24.11) that fails after it has sent status 200
// appends its exception to the data ("Code: N, e.displayText() =
// DB::Exception: …", or, 25.1+, a `__exception__` block). So unless the
// status is final (wait_end_of_query=1 was sent), a tail of the body is held
// back until the body is complete, and only then searched for an exception
// (find_body_exception): a body ending with one completes with its code,
// and no byte of the exception ever reaches the sink as data. Pure: the
// transport feeds it what it reads; the tests feed it every chunking.
#pragma once

#include <chstate/detail/http/reply.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace chstate::detail {

class held_back_tail {
public:
    /// How much is held back: an exception text is far shorter.
    static constexpr std::size_t default_hold = 16 * 1024;

    /// `status_final`: the server buffered the reply (wait_end_of_query=1),
    /// so the body is data only and nothing is held back or searched.
    explicit held_back_tail(bool status_final, std::size_t hold = default_hold) noexcept
        : hold_(hold), final_(status_final) {}

    /// Takes the next bytes of the body; returns those that may go to the
    /// sink now (often none), valid until the next call. Held bytes pass on
    /// once more than twice `hold` are pending, all but the last `hold`, cut
    /// after a line break where the part passed holds one, so that an
    /// exception text, which starts a line, stays in the tail.
    std::string_view put(std::string_view bytes) {
        drop_passed();
        pending_.append(bytes.data(), bytes.size());
        if (final_) {
            passed_ = pending_.size();
            return pending_;
        }
        if (pending_.size() <= 2 * hold_)
            return {};
        const std::size_t pass = pending_.size() - hold_;
        const auto nl = pending_.rfind('\n', pass);
        passed_ = (nl != std::string::npos && nl > 0) ? nl + 1 : pass;
        return std::string_view(pending_.data(), passed_);
    }

    /// What the end of a complete body holds.
    struct ending {
        /// The rest of the data, for the sink (empty when `exception` is set).
        std::string_view data;
        /// The exception text the body ends with (from its "Code: " or
        /// `__exception__` to the end), if any.
        std::string_view exception;
        bool has_exception = false;
    };

    /// The body is complete: the held tail, searched for an exception.
    /// Valid until the filter changes or goes.
    ending finish() {
        drop_passed();
        ending e;
        if (!final_) {
            if (const auto at = find_body_exception(pending_); at != std::string::npos) {
                e.exception = std::string_view(pending_).substr(at);
                e.has_exception = true;
                return e;
            }
        }
        e.data = pending_;
        return e;
    }

private:
    void drop_passed() {
        pending_.erase(0, passed_);
        passed_ = 0;
    }

    std::string pending_;    ///< held bytes; the first passed_ were returned by the last put()
    std::size_t passed_ = 0;
    std::size_t hold_;
    bool final_;
};

} // namespace chstate::detail
