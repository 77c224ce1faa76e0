#include "core/thread_pool.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace ts {

namespace {
thread_local bool t_insideJob = false;
std::unique_ptr<ThreadPool> g_pool;
std::mutex g_poolMutex;

int defaultThreads() {
    if (const char* env = std::getenv("TS_THREADS")) {
        const int n = std::atoi(env);
        if (n > 0) return n;
    }
    return std::max(1u, std::thread::hardware_concurrency());
}
}  // namespace

ThreadPool::ThreadPool(int threads) : m_size(std::max(1, threads)) {
    for (int i = 1; i < m_size; ++i) m_workers.emplace_back([this, i] { workerLoop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stop = true;
    }
    m_wake.notify_all();
    for (auto& t : m_workers) t.join();
}

static void runChunk(const std::function<void(int64_t, int64_t)>& fn, int64_t n, int chunks, int index) {
    const int64_t begin = n * index / chunks, end = n * (index + 1) / chunks;
    if (begin < end) fn(begin, end);
}

void ThreadPool::parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
    if (n <= 0) return;
    const int64_t maxChunks = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
    const int chunks = int(std::min<int64_t>(m_size, maxChunks));
    if (chunks <= 1 || t_insideJob) {
        fn(0, n);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_job = &fn;
        m_n = n;
        m_chunks = chunks;
        m_pending = chunks - 1;
        ++m_generation;
    }
    m_wake.notify_all();
    t_insideJob = true;
    runChunk(fn, n, chunks, 0);
    t_insideJob = false;
    std::unique_lock<std::mutex> lock(m_mutex);
    m_done.wait(lock, [this] { return m_pending == 0; });
    m_job = nullptr;
}

void ThreadPool::workerLoop(int index) {
    uint64_t seen = 0;
    t_insideJob = true;
    for (;;) {
        const std::function<void(int64_t, int64_t)>* job;
        int64_t n;
        int chunks;
        {
            std::unique_lock<std::mutex> lock(m_mutex);
            m_wake.wait(lock, [&] { return m_stop || m_generation != seen; });
            if (m_stop) return;
            seen = m_generation;
            job = m_job;
            n = m_n;
            chunks = m_chunks;
        }
        if (index < chunks) {
            runChunk(*job, n, chunks, index);
            std::lock_guard<std::mutex> lock(m_mutex);
            if (--m_pending == 0) m_done.notify_one();
        }
    }
}

ThreadPool& ThreadPool::global() {
    std::lock_guard<std::mutex> lock(g_poolMutex);
    if (!g_pool) g_pool = std::make_unique<ThreadPool>(defaultThreads());
    return *g_pool;
}

void ThreadPool::setGlobalThreads(int threads) {
    std::lock_guard<std::mutex> lock(g_poolMutex);
    g_pool = std::make_unique<ThreadPool>(threads);
}

}  // namespace ts
