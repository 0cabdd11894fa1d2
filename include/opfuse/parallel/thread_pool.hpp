// A fixed std::thread pool: threads are started once, then each parallel_for wakes them, hands out task
// indices from an atomic counter (the calling thread works too) and waits for the last task. No heap
// allocation per call: the task body is passed by reference through a function pointer.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "../core/error.hpp"
#include "../core/tensor.hpp"

namespace opfuse {

class thread_pool {
public:
    // `threads` counts the caller: thread_pool(2) starts one worker.
    explicit thread_pool(int threads = static_cast<int>(std::thread::hardware_concurrency())) {
        detail::require(threads >= 1, "thread_pool: need at least one thread, got ", threads);
        workers_.reserve(static_cast<std::size_t>(threads - 1));
        for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
    }
    thread_pool(const thread_pool&) = delete;
    thread_pool& operator=(const thread_pool&) = delete;
    ~thread_pool() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stopping_ = true;
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
        std::unique_lock<std::mutex> call_lock(call_mutex_);  // one parallel_for at a time
        body_ = &f;
        invoke_ = [](void* body, index_t i) { (*static_cast<std::remove_reference_t<F>*>(body))(i); };
        count_ = n;
        next_.store(0, std::memory_order_relaxed);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            busy_ = static_cast<int>(workers_.size());
            ++generation_;
        }
        wake_.notify_all();
        run_tasks();
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [this] { return busy_ == 0; });
    }

private:
    void run_tasks() {
        for (index_t i = next_.fetch_add(1); i < count_; i = next_.fetch_add(1)) invoke_(body_, i);
    }

    void worker_loop() {
        std::uint64_t seen = 0;
        for (;;) {
            {
                std::unique_lock<std::mutex> lock(mutex_);
                wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
                if (stopping_) return;
                seen = generation_;
            }
            run_tasks();
            std::lock_guard<std::mutex> lock(mutex_);
            if (--busy_ == 0) done_.notify_one();
        }
    }

    std::vector<std::thread> workers_;
    std::mutex call_mutex_, mutex_;
    std::condition_variable wake_, done_;
    std::uint64_t generation_ = 0;
    int busy_ = 0;
    bool stopping_ = false;
    void* body_ = nullptr;
    void (*invoke_)(void*, index_t) = nullptr;
    index_t count_ = 0;
    std::atomic<index_t> next_{0};
};

}  // namespace opfuse
