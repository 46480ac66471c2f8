#include "tuner/run/model_work.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <sstream>

#include "cuda/nvrtc.h"
#include "tuner/measure/arguments.h"
#include "tuner/model/space_search.h"
#include "tuner/search/strategy.h"
#include "variants/instantiate.h"

namespace gputune::tuner {

namespace {

void index_plan(Plan& p) {
  p.position_of.clear();
  p.position_of.reserve(p.index.size());
  for (std::size_t k = 0; k < p.index.size(); ++k) p.position_of.emplace(p.index[k], k);
  p.left_out.resize(p.index.size(), 0);
}

}  // namespace

Plan plan_without_search(RunState& s, bool& search) {
  const Job& job = s.job;
  const Space& space = s.space;
  Plan p;
  search = false;
  if (!s.guided) {
    // A strategy without feedback: its first configurations within the budget. The default is
    // the reference and the baseline: always planned, first.
    auto strategy = make_strategy(job.strategy, space.size(), job.seed);
    p.index = plan(*strategy, budget_configurations(job.budget, space.size()));
    if (s.default_index >= 0) {
      const auto d = static_cast<std::size_t>(s.default_index);
      auto it = std::find(p.index.begin(), p.index.end(), d);
      if (it == p.index.end()) {
        p.index.insert(p.index.begin(), d);
        s.log << "gputune: note: the default configuration " << default_key(job)
              << " was added to the plan as the reference and baseline\n";
      } else {
        std::rotate(p.index.begin(), it, it + 1);
      }
    }
  } else if (s.stored_plan && s.stored_plan->searched) {
    // A resumed run goes on with the plan it stored (db::RunPlan): searching again could choose
    // other configurations (a calibration fitted in between, another --model-analyses).
    const db::RunPlan& rp = *s.stored_plan;
    std::size_t missing = 0;
    for (const auto* keys : {&rp.chosen, &rp.left_out})
      for (const std::string& key : *keys) {
        if (const long i = space.find(key); i >= 0)
          p.index.push_back(static_cast<std::size_t>(i));
        else
          ++missing;
      }
    if (missing)
      throw JobError("command line", "--resume",
                     "cannot resume run " + std::to_string(*s.opt.resume_run) + ": " +
                         std::to_string(missing) + " of the " +
                         std::to_string(p.index.size() + missing) +
                         " configurations its model search planned are not in the job's space "
                         "as this gputune builds it",
                     "leave out --resume to start a new run");
    p.left_out.assign(p.index.size(), 0);
    for (std::size_t k = rp.chosen.size(); k < p.index.size(); ++k) p.left_out[k] = 1;
    p.searched = true;
    p.summary = rp.summary;
    s.log << "gputune: run " << *s.opt.resume_run
          << " goes on with the plan its model search made (" << rp.chosen.size()
          << " configurations searched, " << rp.left_out.size() << " drawn from the "
          << (space.size() - rp.chosen.size())
          << " it left out); the space is not searched again\n";
  } else if (s.stored_plan && space.size() > s.job.model_analyses) {
    s.log << "gputune: run " << *s.opt.resume_run << " planned all " << space.size()
          << " configurations without a model search, and goes on so\n";
  } else if (space.size() > s.job.model_analyses && s.job.strategy == "model_guided") {
    search = true;  // (portfolio searches the whole space itself, without the model)
    return p;
  }
  if (p.index.empty() && s.guided) {  // the whole space
    p.index.resize(space.size());
    for (std::size_t i = 0; i < space.size(); ++i) p.index[i] = i;
  }
  index_plan(p);
  return p;
}

ModelWork::ModelWork(const RunState& s, Plan plan, bool search)
    : s_(s),
      search_(search),
      models_(s.use_model && s.rates.rates.has_value()),
      plan_(std::move(plan)),
      plan_ready_(!search),
      contexts_(s.job.contexts.size()),
      thread_([this] {
        cuda::lower_compile_thread_priority();
        work();
      }) {}

ModelWork::~ModelWork() {
  cancel_ = true;
  thread_.join();
}

bool ModelWork::stopping() const { return cancel_ || (s_.opt.should_stop && s_.opt.should_stop()); }

void ModelWork::say(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  messages_.push_back(line);
}

std::vector<std::string> ModelWork::take_messages() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(messages_, {});
}

const Plan* ModelWork::plan() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return plan_ready_ || error_; });
  if (error_) std::rethrow_exception(error_);
  return plan_stopped_ ? nullptr : &plan_;
}

const ContextModel* ModelWork::context(std::size_t k) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return contexts_ready_ > k || error_; });
  if (error_) std::rethrow_exception(error_);
  return contexts_[k] ? &*contexts_[k] : nullptr;
}

void ModelWork::work() {
  const Job& job = s_.job;
  const int threads = s_.opt.threads ? s_.opt.threads : job.compile_threads;
  auto should_stop = [this] { return stopping(); };
  try {
    if (search_) {
      Stage st([this](const std::string& l) { say(l); }, "model search");
      ModelSearchOptions mo;
      mo.limit = static_cast<std::size_t>(job.model_analyses);
      mo.threads = threads;
      mo.progress = s_.opt.progress, mo.should_stop = should_stop;
      std::vector<const ContextSpec*> ctxs;
      for (const ContextSpec& c : job.contexts) ctxs.push_back(&c);
      const ModelSearch found = search_by_model(job, s_.source, s_.space, ctxs, s_.limits, s_.rates,
                                                s_.calibration, cache_for(s_.opt.cache_dir), mo);
      Plan p;
      if (!found.interrupted) {
        p.searched = true;
        p.summary = found.summary(s_.space.size(), mo.limit);
        p.index = found.chosen;  // the default configuration is always among them
        // The regret sample must be able to see what the search left out: RegretSample of
        // those, drawn at random, join the plan, and each context's sample times those of them
        // that are pruned or skipped (besides its usual draw among the planned ones).
        std::vector<char> looked(s_.space.size(), 0);
        for (std::size_t i : p.index) looked[i] = 1;
        const auto draws = static_cast<std::size_t>(std::max(0, job.pruner.regret_sample));
        std::mt19937_64 rng(job.seed ^ 0x5eed1eff0u);
        std::vector<std::size_t> drawn;
        for (std::size_t tries = 0; drawn.size() < draws && tries < 100 * draws; ++tries) {
          const std::size_t i =
              std::uniform_int_distribution<std::size_t>(0, s_.space.size() - 1)(rng);
          if (!looked[i]) looked[i] = 1, drawn.push_back(i);
        }
        const std::size_t searched = p.index.size();
        p.index.insert(p.index.end(), drawn.begin(), drawn.end());
        p.left_out.assign(p.index.size(), 0);
        for (std::size_t k = searched; k < p.index.size(); ++k) p.left_out[k] = 1;
        index_plan(p);
        say("gputune: " + p.summary);
        if (!drawn.empty())
          say("gputune: regret sample: " + std::to_string(drawn.size()) +
              " configurations the search left out, drawn at random, join the plan, so that the "
              "regret covers what it did not look at");
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        plan_ = std::move(p);
        plan_stopped_ = found.interrupted;
        plan_ready_ = true;
      }
      cv_.notify_all();
      if (found.interrupted) {
        std::lock_guard<std::mutex> lock(mu_);
        contexts_ready_ = contexts_.size();
        cv_.notify_all();
        return;
      }
    }
    // Each context's model of the plan before compiling: its best cases.
    std::vector<Config> configs;
    if (models_) {
      configs.reserve(plan_.index.size());
      for (std::size_t i : plan_.index) configs.push_back(s_.space.config(i));
    }
    for (std::size_t k = 0; k < job.contexts.size(); ++k) {
      std::optional<ContextModel> cm;
      if (models_ && !stopping()) {
        const ContextSpec& ctx = job.contexts[k];
        Stage st([this](const std::string& l) { say(l); }, "analysis " + ctx.name);
        const std::size_t n = configs.size();
        cm.emplace();
        cm->best_case.assign(n, std::numeric_limits<double>::quiet_NaN());
        cm->max_blocks.assign(n, 0);
        cm->threads_per_block.assign(n, 0);
        std::vector<bool> usable(n, false);
        std::vector<pruner::Occupancy> occ(n);
        for (std::size_t i = 0; i < n; ++i) {
          try {
            const LaunchGeometry g = launch_geometry(job, configs[i], ctx);
            // No registers and no static shared memory: the most blocks per SM it can get.
            occ[i] = pruner::compute_occupancy(pruner::Resources{}, g.threads_per_block(),
                                               g.dynamic_smem, s_.limits);
            cm->threads_per_block[i] = g.threads_per_block();
            cm->max_blocks[i] = occ[i].feasible ? occ[i].blocks_per_sm : 0;
            usable[i] = true;
          } catch (const JobError&) {
          }
        }
        // The arguments the model reads: sizes, scalars, and the read-only index arrays.
        const ModelArguments args =
            model_arguments(make_arguments(job, ctx, ArgumentContents::SizesOnly));
        cm->run = run_model(job, s_.source, configs, ctx, args, usable, occ, s_.rates,
                            s_.calibration, threads, s_.opt.progress && k == 0,
                            TrafficCache{cache_for(s_.opt.cache_dir).dir()}, should_stop);
        for (std::size_t i = 0; i < n; ++i) {
          if (!usable[i] || !occ[i].feasible || !cm->run.features[i].ok) continue;
          const pruner::Prediction p = pruner::best_case(cm->run.features[i], *s_.rates.rates,
                                                         s_.calibration, occ[i].blocks_per_sm);
          if (p.ok) cm->best_case[i] = p.ms;
        }
        if (cm->run.interrupted) cm.reset();
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        contexts_[k] = std::move(cm);
        contexts_ready_ = k + 1;
      }
      cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::current_exception();
    plan_ready_ = true;
    contexts_ready_ = contexts_.size();
    cv_.notify_all();
  }
}

}  // namespace gputune::tuner
