(defproject stutter-jepsen "0.1.0-SNAPSHOT"
  :description "Jepsen test for stutter, a MultiPaxos replicated KV store,
               under partitions, crashes and stop-the-world (GC-like) pauses."
  :license {:name "Eclipse Public License"
            :url  "http://www.eclipse.org/legal/epl-v10.html"}
  :dependencies [[org.clojure/clojure "1.12.5"]
                 ; Knossos and Elle come with Jepsen.
                 [jepsen "0.3.13"]]
  :source-paths ["jepsen/src"]
  :test-paths ["jepsen/test"]
  :resource-paths ["jepsen/resources"]
  :target-path "target/lein/%s"
  :main stutter.core
  :jvm-opts ["-Xmx4g"
             "-Djava.awt.headless=true"
             "-server"])
