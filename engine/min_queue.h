// A min-priority queue whose least element is held apart from the heap: what the step model's
// call-by-call walks use to merge the calls of folded runs with those of other threads.
//
// Those walks push a run's next call right after taking its last one, and most of the time the
// queue holds one run (one thread feeding the GPU): with the least element outside the heap, a
// push into an empty queue, top() and pop() touch no heap at all. std::priority_queue sifted
// every call of every run through its heap: in a launch loop's session analysis that was a tenth
// of the tracer's end.
//
// The same contract as std::priority_queue<T, std::vector<T>, std::greater<T>>: top() is the
// least element by T's operator>, and for elements that no operator> orders (equal ones) which
// comes first is unspecified, as it is there. T must be copyable.
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

namespace ingero::engine {

template <class T>
class MinQueue {
 public:
  bool empty() const { return !has_least_; }
  size_t size() const { return has_least_ ? heap_.size() + 1 : 0; }
  // The least element. Only when !empty().
  const T& top() const { return least_; }
  void push(const T& x) {
    if (!has_least_) {
      least_ = x;
      has_least_ = true;
    } else if (least_ > x) {
      heap_.push_back(least_);
      std::push_heap(heap_.begin(), heap_.end(), std::greater<T>());
      least_ = x;
    } else {
      heap_.push_back(x);
      std::push_heap(heap_.begin(), heap_.end(), std::greater<T>());
    }
  }
  // Removes the least element. Only when !empty().
  void pop() {
    if (heap_.empty()) {
      has_least_ = false;
      return;
    }
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<T>());
    least_ = heap_.back();
    heap_.pop_back();
  }

 private:
  T least_{};  // valid while has_least_; never greater than an element of heap_
  bool has_least_ = false;
  std::vector<T> heap_;  // the others, a min-heap by std::greater
};

}  // namespace ingero::engine
