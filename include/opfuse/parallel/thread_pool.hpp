// A fixed std::thread pool: threads are started once; each parallel_for publishes the task body, wakes
// the workers, hands out task indices from an atomic counter (the calling thread works too) and waits for
// the last one. Between calls workers spin briefly before sleeping on a condition variable, because an
// inference runs layer after layer and a futex wake-up (tens of µs) would cost as much as a small layer.
// No heap allocation per call: the task body is passed by reference through a function pointer.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define OPFUSE_CPU_RELAX() _mm_pause()
#else
#define OPFUSE_CPU_RELAX() std::this_thread::yield()
#endif

#include "../core/error.hpp"
#include "../core/tensor.hpp"

namespace opfuse {

class thread_pool {
public:
    // `threads` counts the caller: thread_pool(2) starts one worker. `spin` is how many polls a waiting
    // thread makes before it sleeps (0: sleep at once, for pools with more threads than cores).
    explicit thread_pool(int threads = static_cast<int>(std::thread::hardware_concurrency()), int spin = 20000)
        : spin_(spin) {
        detail::require(threads >= 1, "thread_pool: need at least one thread, got ", threads);
        workers_.reserve(static_cast<std::size_t>(threads - 1));
        for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
    }
    thread_pool(const thread_pool&) = delete;
    thread_pool& operator=(const thread_pool&) = delete;
    ~thread_pool() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stopping_.store(true);
        }
        wake_.notify_all();
        for (auto& t : workers_) t.join();
    }

    int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

    template <class F>
    void parallel_for(index_t n, F&& f) {
        if (n <= 0) return;
        if (workers_.empty() || n == 1) {
            for (index_t i = 0; i < n; ++i) f(i);
            return;
        }
        std::lock_guard<std::mutex> call_lock(call_mutex_);  // one parallel_for at a time
        body_ = const_cast<void*>(static_cast<const void*>(&f));
        invoke_ = [](void* body, index_t i) { (*static_cast<std::remove_reference_t<F>*>(body))(i); };
        count_ = n;
        next_.store(0, std::memory_order_relaxed);
        busy_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            generation_.fetch_add(1, std::memory_order_release);
        }
        wake_.notify_all();
        run_tasks();
        for (int i = 0; i < spin_ && busy_.load(std::memory_order_acquire) != 0; ++i) OPFUSE_CPU_RELAX();
        if (busy_.load(std::memory_order_acquire) != 0) {
            std::unique_lock<std::mutex> lock(mutex_);
            done_.wait(lock, [this] { return busy_.load(std::memory_order_acquire) == 0; });
        }
    }

private:
    void run_tasks() {
        for (index_t i = next_.fetch_add(1); i < count_; i = next_.fetch_add(1)) invoke_(body_, i);
    }

    void worker_loop() {
        std::uint64_t seen = 0;
        for (;;) {
            for (int i = 0; i < spin_ && generation_.load(std::memory_order_acquire) == seen && !stopping_.load();
                 ++i)
                OPFUSE_CPU_RELAX();
            if (generation_.load(std::memory_order_acquire) == seen) {
                std::unique_lock<std::mutex> lock(mutex_);
                wake_.wait(lock, [&] { return stopping_.load() || generation_.load() != seen; });
            }
            if (stopping_.load()) return;
            seen = generation_.load(std::memory_order_acquire);
            run_tasks();
            if (busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
                std::lock_guard<std::mutex> lock(mutex_);
                done_.notify_one();
            }
        }
    }

    int spin_;
    std::vector<std::thread> workers_;
    std::mutex call_mutex_, mutex_;
    std::condition_variable wake_, done_;
    std::atomic<std::uint64_t> generation_{0};
    std::atomic<int> busy_{0};
    std::atomic<bool> stopping_{false};
    void* body_ = nullptr;
    void (*invoke_)(void*, index_t) = nullptr;
    index_t count_ = 0;
    std::atomic<index_t> next_{0};
};

}  // namespace opfuse
