(ns stutter.wire-test
  "Encoding and decoding of stutter's text protocol on canned replies. Plain
  clojure.test, no Jepsen: `jepsen/lein test`."
  (:require [clojure.test :refer [deftest is testing]]
            [stutter.wire :as w]))

(deftest encode-test
  (is (= "get k1\n"          (w/encode [:get "k1"])))
  (is (= "put k1 3\n"        (w/encode [:put "k1" 3])))
  (is (= "del k1\n"          (w/encode [:del "k1"])))
  (is (= "cas k1 - 4\n"      (w/encode [:cas "k1" nil 4])))
  (is (= "cas k1 2 4\n"      (w/encode [:cas "k1" 2 4])))
  (is (= "status\n"          (w/encode [:status])))
  (testing "tokens that would break the framing are refused"
    (is (thrown? IllegalArgumentException (w/encode [:put "k 1" 3])))
    (is (thrown? IllegalArgumentException (w/encode [:put "k1" "a\nb"])))
    (is (thrown? IllegalArgumentException (w/encode [:get ""])))
    (is (thrown? IllegalArgumentException (w/encode [:frob "k"])))))

(deftest decode-get-test
  (is (= {:type :ok, :value "7"} (w/decode [:get "k"] "7")))
  (is (= {:type :ok, :value nil} (w/decode [:get "k"] "")) "absent")
  (is (= {:type :ok, :value "7"} (w/decode [:get "k"] "7\r")))
  (is (= {:type :fail, :error [:not-leader "10.0.0.2:7201"]}
         (w/decode [:get "k"] "leader is 10.0.0.2:7201")))
  (is (= {:type :fail, :error :retry} (w/decode [:get "k"] "retry")))
  (is (= :info (:type (w/decode [:get "k"] "error bad command")))))

(deftest decode-write-test
  (doseq [req [[:put "k" 1] [:del "k"]]]
    (is (= {:type :ok, :value nil} (w/decode req "ok")))
    (is (= {:type :fail, :error :retry} (w/decode req "retry")))
    (is (= :fail (:type (w/decode req "leader is n1:7201"))))
    (is (= :info (:type (w/decode req "error stale request"))))
    (is (= :info (:type (w/decode req "huh"))))))

(deftest decode-cas-test
  (let [req [:cas "k" 1 2]]
    (is (= {:type :ok, :value nil} (w/decode req "ok")))
    (is (= {:type :fail, :error [:cas-mismatch "3"]} (w/decode req "fail 3")))
    (is (= {:type :fail, :error [:cas-mismatch nil]} (w/decode req "fail -")))
    (is (= {:type :fail, :error :retry} (w/decode req "retry")))
    (is (= {:type :fail, :error [:not-leader "n2:7201"]}
           (w/decode req "leader is n2:7201")))
    (is (= :info (:type (w/decode req "fail"))) "no current value: not understood")))

(deftest decode-status-test
  (let [line "{\"id\":1,\"role\":\"Leader\",\"ballot\":{\"round\":3,\"replica\":1},\"leader\":1,\"last_executed\":42,\"global_last_executed\":40,\"last_index\":42,\"digest\":18446744073709551615}"
        r    (w/decode [:status] line)]
    (is (= :ok (:type r)))
    (is (= 1 (:id (:value r))))
    (is (= 1 (:leader (:value r))))
    (is (= "Leader" (:role (:value r))))
    (is (= 18446744073709551615N (:digest (:value r))) "u64 digest does not overflow"))
  (is (nil? (:leader (w/parse-status "{\"id\":0,\"leader\":null}"))))
  (is (= :fail (:type (w/decode [:status] "retry")))))

(deftest addr-test
  (is (= ["10.0.0.1" 7201] (w/parse-addr "10.0.0.1:7201")))
  (is (= ["n1" 7201] (w/parse-addr "n1:7201")))
  (is (thrown? IllegalArgumentException (w/parse-addr "n1"))))

(deftest socket-test
  (testing "a canned one-line server: round trip, and a silent server times out"
    (with-open [ss (java.net.ServerSocket. 0)]
      (let [port (.getLocalPort ss)
            srv  (future
                   (with-open [s  (.accept ss)
                               in (java.io.BufferedReader.
                                    (java.io.InputStreamReader. (.getInputStream s)))
                               out (java.io.PrintWriter. (.getOutputStream s) true)]
                     (let [l1 (.readLine in)]
                       (.println out (if (= l1 "put k 1") "ok" "error bad command")))
                     ; Read the second request and never answer it.
                     (.readLine in)
                     (Thread/sleep 1500)))
            conn (w/connect "127.0.0.1" port 500)]
        (try
          (is (= {:type :ok, :value nil} (w/call conn [:put "k" 1])))
          (is (thrown? java.net.SocketTimeoutException (w/call conn [:get "k"])))
          (finally (w/close! conn)))
        @srv))))
