(ns stutter.gc-opts
  "The --gc option of the Jepsen test: every replica runs a collector model
  ([gc] in docs/replica-gc.md). Needs no Jepsen: test/stutter/gc_opts_test.clj."
  (:require [clojure.string :as str]))

(defn parse-gc
  "\"g1:8:blade\" -> {:model \"g1\", :ratio 8.0, :blade true, :dataset-mib 64}:
  the collector model every replica runs ([gc] in docs/replica-gc.md), its
  memory limit as a multiple of the modelled data, and GC coordination."
  [s]
  (let [[model ratio & more] (str/split (str s) #":")
        blade   (boolean (some #{"blade"} more))
        extra   (remove #{"blade"} more)
        dataset (some-> (first extra) parse-long)
        ratio   (some-> ratio parse-double)]
    (when-not (and (#{"go" "g1"} model) ratio (> ratio 1.0) (<= (count extra) 1)
                   (or (empty? extra) (and dataset (pos? dataset))))
      (throw (IllegalArgumentException.
               (str "--gc " s ": expected MODEL:RATIO[:blade][:DATASET_MIB], model go or g1, ratio above 1"))))
    {:model model :ratio ratio :blade blade :dataset-mib (or dataset 64)}))

(defn gc-toml
  "The [gc] section for a parsed --gc, or nothing."
  [{:keys [model ratio blade dataset-mib] :as gc}]
  (if-not gc
    ""
    (str "\n[gc]\n"
         "model = \"" model "\"\n"
         "memory_limit_mib = " (max 1 (Math/round (double (* ratio dataset-mib)))) "\n"
         "dataset_mib = " dataset-mib "\n"
         "coordinated = " (if blade "true" "false") "\n")))
