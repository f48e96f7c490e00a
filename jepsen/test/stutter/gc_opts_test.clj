(ns stutter.gc-opts-test
  "The test's --gc option and the [gc] section it writes. Plain
  clojure.test, no Jepsen: `jepsen/lein test`."
  (:require [clojure.string :as str]
            [clojure.test :refer [deftest is testing]]
            [stutter.gc-opts :as gc-opts]))

(deftest parse-gc-test
  (is (= {:model "g1" :ratio 8.0 :blade true :dataset-mib 64} (gc-opts/parse-gc "g1:8:blade")))
  (is (= {:model "go" :ratio 1.5 :blade false :dataset-mib 32} (gc-opts/parse-gc "go:1.5:32")))
  (testing "refused"
    (doseq [bad ["zgc:8" "go" "go:1" "go:x" "go:8:blade:0" "go:8:nope" "go:8:16:32"]]
      (is (thrown? IllegalArgumentException (gc-opts/parse-gc bad)) bad))))

(deftest gc-toml-test
  (let [t (gc-opts/gc-toml (gc-opts/parse-gc "g1:8:blade"))]
    (is (str/includes? t "model = \"g1\""))
    (is (str/includes? t "memory_limit_mib = 512"))
    (is (str/includes? t "dataset_mib = 64"))
    (is (str/includes? t "coordinated = true")))
  (is (= "" (gc-opts/gc-toml nil)) "no --gc, no [gc] section"))
