// Typed side data on the PassContext: what a front end hands to passes
// (calibration batches) and what passes hand back (a pass's report), keyed
// by type, instead of process-wide statics.
//
// Values are held by value (std::any), so a copy of a SideData is
// independent of the original: a tuning trial that runs a pass on a derived
// context writes its report there, never into the run's. A type is one slot:
// setting it again replaces the value.
#pragma once

#include <any>
#include <map>
#include <typeindex>
#include <utility>

namespace ptopt::rewriters {

class SideData {
 public:
  template <class T>
  void set(T value) {
    items_[std::type_index(typeid(T))] = std::move(value);
  }
  // The value of type T, or null when none was set.
  template <class T>
  const T* find() const {
    auto it = items_.find(std::type_index(typeid(T)));
    return it == items_.end() ? nullptr : std::any_cast<T>(&it->second);
  }
  template <class T>
  T* find() {
    auto it = items_.find(std::type_index(typeid(T)));
    return it == items_.end() ? nullptr : std::any_cast<T>(&it->second);
  }
  // The value of type T, default-constructed first when none was set.
  template <class T>
  T& getOrCreate() {
    std::any& slot = items_[std::type_index(typeid(T))];
    if (!slot.has_value()) slot = T{};
    return *std::any_cast<T>(&slot);
  }
  template <class T>
  void erase() {
    items_.erase(std::type_index(typeid(T)));
  }
  void clear() { items_.clear(); }
  bool empty() const { return items_.empty(); }

 private:
  std::map<std::type_index, std::any> items_;
};

}  // namespace ptopt::rewriters
