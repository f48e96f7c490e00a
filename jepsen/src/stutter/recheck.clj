(ns stutter.recheck
  "Knossos on histories written elsewhere, key by key, and its verdicts
  beside Porcupine's.

    lein run recheck jepsen/results/ci-campaign jepsen/results/ci-negative-control
    lein run recheck store/latest/history.edn
    lein run recheck --per-key --first-ops 50 store/latest/history.edn

  An argument is a campaign results folder (history.edn, verdict.json:
  docs/campaigns.md) or a Jepsen history.edn file; either holds
  jepsen.independent tuples, [key value]. Each key's history is checked
  on its own by stutter.linearizable (Knossos's linear analysis, the
  cas-register model, indeterminate reads dropped, a time limit), one key
  at a time so that the heap each takes can be told apart: the peak of the
  heap in use while it ran, above what was in use before, sampled every
  5 ms after a full GC. That includes garbage not yet collected, so it
  bounds the key's need from above.

  Where a folder has verdict.json, Porcupine's verdict on each key
  (linearizable_keys) must equal Knossos's: Ok = true, Illegal = false.
  Knossos :unknown (time or memory ran out) is not agreement either: the
  command exits 1 on any disagreement, and 0 when every key agrees."
  (:require [clojure.data.json :as json]
            [clojure.edn :as edn]
            [clojure.java.io :as io]
            [clojure.string :as str]
            [knossos.model :as model]
            [stutter.linearizable :as linearizable])
  (:import (java.lang.management ManagementFactory)))

(defn read-history
  "The ops of an EDN history, one map per line."
  [file]
  (with-open [r (io/reader file)]
    (->> (line-seq r)
         (remove str/blank?)
         (mapv edn/read-string))))

(defn by-key
  "key -> that key's ops, values unwrapped from [key value] tuples, in
  history order. Ops without a tuple (the nemesis's) are left out: they
  say nothing about a register."
  [ops]
  (reduce (fn [m op]
            (let [v (:value op)]
              (if (and (vector? v) (= 2 (count v)) (not= :nemesis (:process op)))
                (update m (first v) (fnil conj []) (assoc op :value (second v)))
                m)))
          (sorted-map-by #(compare (str %1) (str %2)))
          ops))

(defn first-ops
  "A key's history cut to its first n invocations and their completions:
  what the key would have been with --ops-per-key n."
  [n ops]
  (loop [ops ops, invoked 0, open #{}, out (transient [])]
    (if-let [op (first ops)]
      (let [p (:process op)]
        (cond
          (= :invoke (:type op))
          (if (< invoked n)
            (recur (rest ops) (inc invoked) (conj open p) (conj! out op))
            (recur (rest ops) invoked open out))

          (open p) (recur (rest ops) invoked (disj open p) (conj! out op))
          :else    (recur (rest ops) invoked open out)))
      (persistent! out))))

(defn- heap-used []
  (.getUsed (.getHeapMemoryUsage (ManagementFactory/getMemoryMXBean))))

(defn measured
  "Runs f; returns [its value, seconds, peak heap above the start (bytes)]."
  [f]
  (System/gc)
  (let [base (heap-used)
        peak (atom base)
        done (atom false)
        t    (doto (Thread. ^Runnable
                            (fn []
                              (while (not @done)
                                (swap! peak max (heap-used))
                                (Thread/sleep 5))))
               (.setDaemon true)
               (.start))
        t0   (System/nanoTime)
        v    (try (f) (finally (reset! done true) (.join t)))]
    [v (/ (- (System/nanoTime) t0) 1e9) (max 0 (- @peak base))]))

(defn check-key
  "opts: :first-ops n (only the key's first n invocations),
  :keep-indeterminate-reads?."
  [ops time-limit-ms opts]
  (let [ops (cond->> ops (:first-ops opts) (first-ops (:first-ops opts)))
        [a secs heap] (measured #(linearizable/analysis (model/cas-register) ops time-limit-ms opts))]
    {:valid? (:valid? a), :cause (:cause a), :seconds secs, :heap-bytes heap
     :ops (count (filter #(= :invoke (:type %)) ops))}))

(def porcupine->knossos {"Ok" true, "Illegal" false})

(defn source
  "{:name, :history file, :porcupine {key verdict} or nil} for an argument."
  [arg]
  (let [f (io/file arg)]
    (if (.isDirectory f)
      (let [v (io/file f "verdict.json")]
        {:name      arg
         :history   (io/file f "history.edn")
         :porcupine (when (.exists v)
                      (get (json/read-str (slurp v)) "linearizable_keys" {}))})
      {:name arg, :history f, :porcupine nil})))

(defn recheck-one
  "Checks one history; returns {:name, :keys [...], :agree? bool or nil}."
  ([src time-limit-ms] (recheck-one src time-limit-ms {}))
  ([{:keys [name history porcupine]} time-limit-ms opts]
   (let [keys (vec (for [[k ops] (by-key (read-history history))]
                     (let [r (check-key ops time-limit-ms opts)
                           ; A key Porcupine never saw had no op to check: Ok.
                           p (when porcupine (get porcupine (str k) "Ok"))]
                       (assoc r :key k :porcupine p
                              :agree? (when p (= (porcupine->knossos p ::none) (:valid? r)))))))]
     {:name   name
      :keys   keys
      :agree? (when porcupine (every? :agree? keys))})))

(defn- quantile [xs q]
  (let [v (vec (sort xs))]
    (when (seq v) (nth v (min (dec (count v)) (long (* q (count v))))))))

(defn summary-line
  "One line per history: verdict counts, ops and heap per key."
  [{:keys [name keys agree?]}]
  (let [verdicts (frequencies (map :valid? keys))
        ops      (map :ops keys)
        mib      (map #(/ (:heap-bytes %) 1048576.0) keys)]
    (format "%s: %d keys; Knossos true/false/unknown %d/%d/%d; ops per key median %d max %d; heap per key median %.0f MiB max %.0f MiB; slowest key %.1f s; %s"
            name (count keys) (verdicts true 0) (verdicts false 0) (verdicts :unknown 0)
            (or (quantile ops 0.5) 0) (reduce max 0 ops)
            (or (quantile mib 0.5) 0.0) (reduce max 0.0 mib)
            (reduce max 0.0 (map :seconds keys))
            (case agree?
              true  "agrees with Porcupine on every key"
              false (str "DISAGREES with Porcupine on "
                         (str/join ", " (for [k keys :when (not (:agree? k))]
                                          (str (:key k) " (Knossos " (:valid? k)
                                               (when (:cause k) (str ", " (:cause k)))
                                               ", Porcupine " (:porcupine k) ")"))))
              nil   "no Porcupine verdicts to compare"))))

(defn recheck!
  "Rechecks every argument, prints a line for each (and one per key with
  per-key?); returns the results."
  [args time-limit-ms {:keys [per-key?] :as opts}]
  (doall
    (for [a args]
      (let [r (recheck-one (source a) time-limit-ms opts)]
        (when per-key?
          (doseq [k (:keys r)]
            (println (format "  %s key %s: %d ops, Knossos %s%s, %.2f s, %.1f MiB%s"
                             (:name r) (:key k) (:ops k) (:valid? k)
                             (if (:cause k) (str " (" (:cause k) ")") "")
                             (:seconds k) (/ (:heap-bytes k) 1048576.0)
                             (if (:porcupine k) (str ", Porcupine " (:porcupine k)) "")))))
        (println (summary-line r))
        r))))

(def opt-spec
  [[nil "--time-limit SECONDS" "Knossos's limit per key; then that key is :unknown."
    :default 60
    :parse-fn parse-double
    :validate [pos? "must be positive"]]
   [nil "--per-key" "Print a line per key too."]
   [nil "--first-ops N" "Check only each key's first N invocations (what --ops-per-key N would have cost)."
    :parse-fn parse-long
    :validate [pos? "must be positive"]]
   [nil "--keep-indeterminate-reads" "Keep reads that ended :info (to measure what dropping them saves)."]
   ["-h" "--help"]])

(defn cmd
  "The `recheck` command for jepsen.cli/run!."
  []
  {"recheck"
   {:opt-spec opt-spec
    :usage    "Usage: lein run recheck [--time-limit S] [--per-key] (RESULTS-DIR | history.edn)..."
    :run      (fn [{:keys [options arguments]}]
                (when (empty? arguments)
                  (println "recheck: name campaign results folders or history.edn files")
                  (System/exit 254))
                (let [rs (recheck! arguments (long (* 1000 (:time-limit options)))
                                   {:per-key?                  (:per-key options)
                                    :first-ops                 (:first-ops options)
                                    :keep-indeterminate-reads? (:keep-indeterminate-reads options)})]
                  (when (some false? (map :agree? rs))
                    (System/exit 1))))}})
