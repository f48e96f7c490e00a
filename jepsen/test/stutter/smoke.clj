(ns stutter.smoke
  "The Jepsen-visible parts that need no Jepsen: stutter.wire's unit tests
  and, given a running cluster's client addresses, a live round trip
  (put/get/cas/del/status) through the same encode/decode the Jepsen client
  uses. Run by jepsen/clj-smoke; prints \"N passed, N failed\" and exits
  non-zero on any failure."
  (:require [clojure.string :as str]
            [clojure.test :as t]
            [clojure.java.io :as io]
            [stutter.gc-opts :as gc-opts]
            [stutter.wire :as w]
            [stutter.wire-test]))

(def passed (atom 0))
(def failed (atom 0))

(defn check
  [what ok? detail]
  (if ok?
    (do (swap! passed inc) (println "  ok  " what))
    (do (swap! failed inc) (println "  FAIL" what "--" (pr-str detail)))))

(defn sources-read!
  "Every namespace under src/ read form by form (not evaluated: most need
  Jepsen, which is not reachable here): a syntax error or an unbalanced
  form in any of them fails the smoke test."
  []
  (doseq [f (sort (filter #(.endsWith (.getName ^java.io.File %) ".clj") (file-seq (io/file "src"))))]
    (let [r (try
              (binding [*read-eval* false]
                (with-open [rdr (java.io.PushbackReader. (io/reader f))]
                  (loop [n 0]
                    (let [form (read {:eof ::eof :read-cond :allow} rdr)]
                      (if (= ::eof form) n (recur (inc n)))))))
              (catch Exception e (str e)))]
      (check (str "reads " (.getPath ^java.io.File f)) (and (integer? r) (pos? r)) r))))

(defn gc-opts!
  []
  (check "--gc g1:8:blade" (= {:model "g1" :ratio 8.0 :blade true :dataset-mib 64} (gc-opts/parse-gc "g1:8:blade")) nil)
  (check "--gc go:1.5:32" (= {:model "go" :ratio 1.5 :blade false :dataset-mib 32} (gc-opts/parse-gc "go:1.5:32")) nil)
  (doseq [bad ["zgc:8" "go" "go:1" "go:x" "go:8:blade:0" "go:8:nope" "go:8:16:32"]]
    (check (str "--gc " bad " refused")
           (try (gc-opts/parse-gc bad) false (catch IllegalArgumentException _ true)) nil))
  (let [t (gc-opts/gc-toml (gc-opts/parse-gc "g1:8:blade"))]
    (check "[gc] section" (and (str/includes? t "model = \"g1\"") (str/includes? t "memory_limit_mib = 512")
                               (str/includes? t "dataset_mib = 64") (str/includes? t "coordinated = true")) t))
  (check "no --gc, no [gc]" (= "" (gc-opts/gc-toml nil)) nil))

(defn leader-call
  "Sends req to the cluster, following `leader is` redirects and retrying
  `retry` for up to 20 s. Returns the decoded reply."
  [addrs req]
  (let [deadline (+ (System/currentTimeMillis) 20000)]
    (loop [addr (first addrs), i 0]
      (let [r (try (w/call-once addr req 2000)
                   (catch Exception e {:type :info, :error [:exception (str e)]}))
            e (:error r)]
        (cond
          (> (System/currentTimeMillis) deadline) r

          (and (vector? e) (= :not-leader (first e)))
          (recur (second e) (inc i))

          (or (= :retry e) (and (vector? e) (= :exception (first e))))
          (do (Thread/sleep 200)
              (recur (nth addrs (mod (inc i) (count addrs))) (inc i)))

          :else r)))))

(defn live!
  [addrs]
  (println "live round trip against" (str/join " " addrs))
  (let [k  (str "smoke" (System/currentTimeMillis))
        k2 (str k "b")
        c  (fn [req] (leader-call addrs req))]
    (let [up (doall
               (for [a addrs]
                 (let [r  (try (w/call-once a [:status] 2000)
                               (catch Exception e {:exception (str e)}))
                       ok (and (= :ok (:type r)) (some? (:id (:value r))))]
                   (check (str "status " a) ok r)
                   ok)))]
      (when-not (some true? up)
        (throw (ex-info "no node answers status; skipping the round trip" {}))))
    (let [r (c [:get k])]   (check "get of an absent key is nil" (= {:type :ok, :value nil} r) r))
    (let [r (c [:put k 1])] (check "put k 1" (= :ok (:type r)) r))
    (let [r (c [:get k])]   (check "get k -> 1" (= {:type :ok, :value "1"} r) r))
    (let [r (c [:cas k 1 2])] (check "cas k 1 2 -> ok" (= :ok (:type r)) r))
    (let [r (c [:cas k 1 3])] (check "cas k 1 3 -> fail 2" (= {:type :fail, :error [:cas-mismatch "2"]} r) r))
    (let [r (c [:get k])]   (check "get k -> 2" (= {:type :ok, :value "2"} r) r))
    (let [r (c [:cas k2 nil 5])] (check "cas from absent -> ok" (= :ok (:type r)) r))
    (let [r (c [:cas k2 nil 6])] (check "cas from absent on a present key -> fail 5" (= {:type :fail, :error [:cas-mismatch "5"]} r) r))
    (let [r (c [:del k])]   (check "del k" (= :ok (:type r)) r))
    (let [r (c [:get k])]   (check "get k after del -> nil" (= {:type :ok, :value nil} r) r))
    (let [r (c [:cas k 2 7])] (check "cas on a deleted key -> fail -" (= {:type :fail, :error [:cas-mismatch nil]} r) r))
    (let [rs (for [a addrs]
               (try (w/call-once a [:get k2] 2000) (catch Exception e {:exception (str e)})))]
      (check "every node answers get with the value or a definite rejection"
             (every? (fn [r] (or (= {:type :ok, :value "5"} r) (= :fail (:type r)))) rs)
             rs))))

(defn -main
  [& addrs]
  (println "stutter.wire unit tests")
  (let [{:keys [pass fail error]} (binding [t/*test-out* *out*]
                                    (t/run-tests 'stutter.wire-test))]
    (swap! passed + pass)
    (swap! failed + fail error))
  (println "sources and the --gc option")
  (sources-read!)
  (gc-opts!)
  (when (seq addrs)
    (try (live! (vec addrs))
         (catch clojure.lang.ExceptionInfo e
           (println "  FAIL" (.getMessage e))
           (swap! failed inc))))
  (println (str @passed " passed, " @failed " failed"))
  (shutdown-agents)
  (System/exit (if (zero? @failed) 0 1)))
