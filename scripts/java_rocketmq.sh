#!/usr/bin/env bash
# Build Apache RocketMQ 4.9.8 (the Java peer fastmq is checked against) from source, without Maven:
# javac over Debian's jars, laid out as a ROCKETMQ_HOME (conf/, lib/). Opt-in peers use it:
# tests/test_java_rocketmq.py (FASTMQ_JAVA_CLASSPATH, FASTMQ_JAVA_NAMESRV) and
# `fastmq-bench rocketmq-tools` (FASTMQ_ROCKETMQ_HOME, FASTMQ_ROCKETMQ_CLASSPATH).
#
# Usage: scripts/java_rocketmq.sh [ROCKETMQ_SRC] [OUT]
#   ROCKETMQ_SRC  a RocketMQ source tree (has pom.xml) or a git dir; a git dir is read at
#                 $ROCKETMQ_TAG (default rocketmq-all-4.9.8). Default /work/.mirror/apache+rocketmq/repo
#   OUT           where the build and ROCKETMQ_HOME go (default ~/.cache/fastmq/rocketmq-4.9.8)
# Environment:
#   FASTJSON_SRC (tree or git dir; default /work/.mirror/alibaba+fastjson/repo at $FASTJSON_TAG=1.2.83)
#   DLEDGER_SRC  (tree or git dir; default /work/.mirror/openmessaging+dledger/repo at
#                 $DLEDGER_TAG=dledger-all-0.3.1.2)
#   SNAKEYAML_SRC (tree or git dir; default /work/.mirror/snakeyaml+snakeyaml/repo at $SNAKEYAML_REV,
#                 the snakeyaml-2.0 release commit; the repository has no tags)
#     These are compiled from source too: fastjson has no Debian package (common/remoting need it),
#     nor has DLedger (BrokerController and DefaultMessageStore reference it on every path), and
#     Debian's snakeyaml is 1.33 while acl's AclUtils uses 2.0's TagInspector.
#   FORCE=1      rebuild everything; otherwise a module whose jar exists is kept while the inputs (the
#                sources' commits or paths, javac's version, the release) are the same
# As root it apt-get installs what is missing: openjdk-17-jdk-headless, libnetty-java, libcommons-*,
# libguava-java, libslf4j-java, liblogback-java, libjna-java, liblz4-java,
# libzstd-jni-java, libbcpkix-java (netty's self-signed certificate for the servers' TLS, as in the
# distribution), libjoda-time-java (fastjson's JodaCodec, compile only).
# Built: fastjson, snakeyaml, logging, remoting, common, dledger, srvutil, client, store, acl, filter, broker,
# tools, namesrv, example. Left out: openmessaging (no io.openmessaging API package), test,
# distribution's assembly; the client's three OpenTracing hooks and the examples that need
# OpenTracing/Jaeger/OpenMessaging (no Debian packages; nothing else references them).
# At the end it prints the env lines to export and how to start a NameServer + broker;
# the same text is written to OUT/READY (shell-sourceable).
set -euo pipefail

ROCKETMQ_SRC=${1:-/work/.mirror/apache+rocketmq/repo}
OUT=${2:-$HOME/.cache/fastmq/rocketmq-4.9.8}
ROCKETMQ_TAG=${ROCKETMQ_TAG:-rocketmq-all-4.9.8}
FASTJSON_SRC=${FASTJSON_SRC:-/work/.mirror/alibaba+fastjson/repo}
FASTJSON_TAG=${FASTJSON_TAG:-1.2.83}
DLEDGER_SRC=${DLEDGER_SRC:-/work/.mirror/openmessaging+dledger/repo}
DLEDGER_TAG=${DLEDGER_TAG:-dledger-all-0.3.1.2}
SNAKEYAML_SRC=${SNAKEYAML_SRC:-/work/.mirror/snakeyaml+snakeyaml/repo}
SNAKEYAML_REV=${SNAKEYAML_REV:-59ddbb3304bb8e22e2004d74cddaf9ed4086632e}  # "prepare release snakeyaml-2.0"
SNAKEYAML_VERSION=${SNAKEYAML_VERSION:-2.0}
VERSION=4.9.8
JAVA_RELEASE=${JAVA_RELEASE:-8}

say() { printf '== %s\n' "$*" >&2; }
die() { printf 'java_rocketmq.sh: %s\n' "$*" >&2; exit 1; }

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SRC_DIR=$OUT/src
BUILD=$OUT/build
LIB=$OUT/lib
mkdir -p "$SRC_DIR" "$BUILD" "$LIB" "$OUT/conf"

# ---------------------------------------------------------------- Debian packages
DEB_JARS=(netty-buffer netty-codec netty-common netty-handler netty-resolver netty-transport
          netty-transport-native-epoll netty-transport-native-unix-common
          commons-lang3 commons-cli commons-codec commons-validator commons-beanutils commons-digester
          commons-logging commons-collections3 guava slf4j-api logback-classic logback-core jna
          lz4-java zstd-jni bcprov bcpkix bcutil)
COMPILE_ONLY_JARS=(joda-time)
PKGS=(libnetty-java libcommons-lang3-java libcommons-cli-java libcommons-codec-java
      libcommons-validator-java libcommons-beanutils-java libcommons-digester-java
      libcommons-logging-java libcommons-collections3-java libguava-java libslf4j-java liblogback-java
      libjna-java liblz4-java libzstd-jni-java libbcpkix-java libjoda-time-java)

missing=()
for j in "${DEB_JARS[@]}" "${COMPILE_ONLY_JARS[@]}"; do
    [ -e "/usr/share/java/$j.jar" ] || missing+=("$j")
done
if [ ${#missing[@]} -gt 0 ] || ! command -v javac >/dev/null; then
    [ "$(id -u)" = 0 ] || die "missing ${missing[*]:-javac}: as root, apt-get install ${PKGS[*]} openjdk-17-jdk-headless"
    say "apt-get install (missing: ${missing[*]:-javac})"
    pkgs=("${PKGS[@]}")
    command -v javac >/dev/null || pkgs+=(openjdk-17-jdk-headless)
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends "${pkgs[@]}" >/dev/null \
        || { apt-get update >/dev/null && apt-get install -y --no-install-recommends "${pkgs[@]}" >/dev/null; } \
        || die "apt-get install ${pkgs[*]} failed"
fi
for j in "${DEB_JARS[@]}" "${COMPILE_ONLY_JARS[@]}"; do
    [ -e "/usr/share/java/$j.jar" ] || die "/usr/share/java/$j.jar still missing after apt-get"
done

# ---------------------------------------------------------------- sources
# unpack NAME SRC TAG VAR SUBPATH...: a tree or a git dir (at TAG) into $SRC_DIR/NAME; prints its identity
unpack() {
    local name=$1 src=$2 tag=$3 var=$4; shift 4
    local dest=$SRC_DIR/$name id
    if [ -f "$src/pom.xml" ]; then
        id="tree:$(cd "$src" && pwd)"
        if [ "$(cat "$dest.id" 2>/dev/null)" != "$id" ]; then
            rm -rf "$dest"; mkdir -p "$dest"; cp -a "$src/." "$dest/"
        fi
    elif git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
        id="git:$(git -C "$src" rev-parse "$tag^{commit}")" || die "$src has no $tag"
        if [ "$(cat "$dest.id" 2>/dev/null)" != "$id" ]; then
            rm -rf "$dest"; mkdir -p "$dest"
            git -C "$src" archive "$tag" "$@" | tar -x -C "$dest"
        fi
    else
        die "$name: $src is neither a source tree (pom.xml) nor a git dir: set $var to a clone of $name"
    fi
    echo "$id" > "$dest.id"
    echo "$id"
}
say "sources"
RMQ_ID=$(unpack rocketmq "$ROCKETMQ_SRC" "$ROCKETMQ_TAG" "the first argument")
FJ_ID=$(unpack fastjson "$FASTJSON_SRC" "$FASTJSON_TAG" FASTJSON_SRC src/main)
DL_ID=$(unpack dledger "$DLEDGER_SRC" "$DLEDGER_TAG" DLEDGER_SRC dledger/src/main)
SY_ID=$(unpack snakeyaml "$SNAKEYAML_SRC" "$SNAKEYAML_REV" SNAKEYAML_SRC src/main)
RMQ=$SRC_DIR/rocketmq
grep -q "<version>$VERSION</version>" "$RMQ/pom.xml" || say "warning: $RMQ/pom.xml is not version $VERSION"

JAVAC_VERSION=$(javac -version 2>&1)
[[ $JAVAC_VERSION =~ javac\ ([0-9]+) ]] && [ "${BASH_REMATCH[1]}" -ge 9 ] \
    || die "$JAVAC_VERSION: need a JDK 9 or later (--release); Debian's openjdk-17-jdk-headless"
INPUTS="rocketmq=$RMQ_ID fastjson=$FJ_ID dledger=$DL_ID snakeyaml=$SY_ID javac=$JAVAC_VERSION release=$JAVA_RELEASE"
if [ "${FORCE:-0}" = 1 ] || [ "$(cat "$BUILD/inputs" 2>/dev/null)" != "$INPUTS" ]; then
    rm -rf "$BUILD" "$LIB"; mkdir -p "$BUILD" "$LIB"
    echo "$INPUTS" > "$BUILD/inputs"
fi

deb_cp=""
for j in "${DEB_JARS[@]}" "${COMPILE_ONLY_JARS[@]}"; do deb_cp+="/usr/share/java/$j.jar:"; done

# compile NAME JAR SRCROOT RESOURCES EXCLUDE_REGEX: javac once over SRCROOT into a jar in lib/
CP="$deb_cp"
compile() {
    local name=$1 jar=$2 root=$3 res=$4 exclude=$5
    local cls=$BUILD/classes/$name
    if [ -f "$LIB/$jar" ]; then
        CP+="$LIB/$jar:"; return
    fi
    say "javac $name"
    rm -rf "$cls"; mkdir -p "$cls"
    find "$root" -name '*.java' | { if [ -n "$exclude" ]; then grep -Ev "$exclude"; else cat; fi; } \
        | sort > "$BUILD/$name.sources"
    local rel=(--release "$JAVA_RELEASE")
    # store imports sun.nio.ch.DirectBuffer, which --release 8 does not see (and --release forbids
    # --add-exports): -source/-target against this JDK's classes instead (runs on this JDK, not on 8)
    if [ "$name" = store ]; then rel=(-source "$JAVA_RELEASE" -target "$JAVA_RELEASE"); fi
    javac "${rel[@]}" -nowarn -Xlint:none -XDsuppressNotes -encoding UTF-8 -proc:none \
        -cp "$CP$BUILD/stubs" -d "$cls" @"$BUILD/$name.sources" 2> "$BUILD/$name.javac.log" \
        || { tail -40 "$BUILD/$name.javac.log" >&2; die "javac $name failed (log: $BUILD/$name.javac.log)"; }
    if [ -n "$res" ] && [ -d "$res" ]; then cp -a "$res/." "$cls/"; fi
    (cd "$cls" && jar cf "$LIB/$jar.tmp" .) && mv "$LIB/$jar.tmp" "$LIB/$jar"
    CP+="$LIB/$jar:"
}

# fastjson's MonetaCodec (JSR 354 money) and SwaggerJsonSerializer (springfox), optional in fastjson
# and only reached for those classes, compile against these stubs; they are not put in any jar.
if [ ! -d "$BUILD/stubs" ]; then
    mkdir -p "$BUILD/stubs-src/javax/money" "$BUILD/stubs-src/org/javamoney/moneta"
    cat > "$BUILD/stubs-src/javax/money/CurrencyUnit.java" <<'EOF'
package javax.money;
public interface CurrencyUnit { String getCurrencyCode(); }
EOF
    cat > "$BUILD/stubs-src/javax/money/Monetary.java" <<'EOF'
package javax.money;
public final class Monetary {
    public static CurrencyUnit getCurrency(String code, String... providers) { throw new UnsupportedOperationException(); }
}
EOF
    cat > "$BUILD/stubs-src/org/javamoney/moneta/Money.java" <<'EOF'
package org.javamoney.moneta;
public final class Money {
    public java.math.BigDecimal getNumberStripped() { throw new UnsupportedOperationException(); }
    public javax.money.CurrencyUnit getCurrency() { throw new UnsupportedOperationException(); }
    public static Money of(Number n, javax.money.CurrencyUnit c) { throw new UnsupportedOperationException(); }
}
EOF
    mkdir -p "$BUILD/stubs-src/springfox/documentation/spring/web/json"
    cat > "$BUILD/stubs-src/springfox/documentation/spring/web/json/Json.java" <<'EOF'
package springfox.documentation.spring.web.json;
public class Json { public String value() { throw new UnsupportedOperationException(); } }
EOF
    rm -rf "$BUILD/stubs.tmp"; mkdir -p "$BUILD/stubs.tmp"
    javac --release "$JAVA_RELEASE" -nowarn -d "$BUILD/stubs.tmp" $(find "$BUILD/stubs-src" -name '*.java')
    mv "$BUILD/stubs.tmp" "$BUILD/stubs"
fi

FJ_VERSION=${FASTJSON_TAG#fastjson-}
DL_VERSION=${DLEDGER_TAG##*-}
# fastjson: its Spring, JAX-RS and Retrofit support is left out (ParserConfig and SerializeConfig
# name only the moneta and springfox codecs directly).
compile fastjson "fastjson-$FJ_VERSION.jar" "$SRC_DIR/fastjson/src/main/java" "" \
    '/com/alibaba/fastjson/support/(spring|jaxrs|retrofit)/'
M=org/apache/rocketmq
compile logging "rocketmq-logging-$VERSION.jar" "$RMQ/logging/src/main/java" "$RMQ/logging/src/main/resources" ""
compile remoting "rocketmq-remoting-$VERSION.jar" "$RMQ/remoting/src/main/java" "$RMQ/remoting/src/main/resources" ""
compile common "rocketmq-common-$VERSION.jar" "$RMQ/common/src/main/java" "$RMQ/common/src/main/resources" ""
compile snakeyaml "snakeyaml-$SNAKEYAML_VERSION.jar" "$SRC_DIR/snakeyaml/src/main/java" "" ""
compile dledger "dledger-$DL_VERSION.jar" "$SRC_DIR/dledger/dledger/src/main/java" "" ""
compile srvutil "rocketmq-srvutil-$VERSION.jar" "$RMQ/srvutil/src/main/java" "$RMQ/srvutil/src/main/resources" ""
compile client "rocketmq-client-$VERSION.jar" "$RMQ/client/src/main/java" "$RMQ/client/src/main/resources" \
    "/$M/client/trace/hook/[A-Za-z]*OpenTracingHookImpl\\.java$"
compile store "rocketmq-store-$VERSION.jar" "$RMQ/store/src/main/java" "$RMQ/store/src/main/resources" ""
compile acl "rocketmq-acl-$VERSION.jar" "$RMQ/acl/src/main/java" "$RMQ/acl/src/main/resources" ""
compile filter "rocketmq-filter-$VERSION.jar" "$RMQ/filter/src/main/java" "$RMQ/filter/src/main/resources" ""
compile broker "rocketmq-broker-$VERSION.jar" "$RMQ/broker/src/main/java" "$RMQ/broker/src/main/resources" ""
compile tools "rocketmq-tools-$VERSION.jar" "$RMQ/tools/src/main/java" "$RMQ/tools/src/main/resources" ""
compile namesrv "rocketmq-namesrv-$VERSION.jar" "$RMQ/namesrv/src/main/java" "$RMQ/namesrv/src/main/resources" ""
compile example "rocketmq-example-$VERSION.jar" "$RMQ/example/src/main/java" "$RMQ/example/src/main/resources" \
    "/$M/example/(openmessaging/|tracemessage/OpenTracing)"

# ---------------------------------------------------------------- ROCKETMQ_HOME
for j in "${DEB_JARS[@]}"; do
    real=$(readlink -f "/usr/share/java/$j.jar")
    [ -f "$LIB/$(basename "$real")" ] || cp "$real" "$LIB/"
done
cp -a "$RMQ/distribution/conf/." "$OUT/conf/"
mkdir -p "$OUT/bin"
cp -a "$RMQ/distribution/bin/." "$OUT/bin/"

CLIENT_CP=""
for j in rocketmq-client rocketmq-common rocketmq-remoting rocketmq-logging rocketmq-acl; do
    CLIENT_CP+="$LIB/$j-$VERSION.jar:"
done
CLIENT_CP+="$LIB/fastjson-$FJ_VERSION.jar"
# the client's Maven dependencies (common: commons-validator and what it needs, lz4, zstd; remoting:
# netty; acl: commons-codec, snakeyaml), acl for AclClientRPCHook
for j in netty-buffer netty-codec netty-common netty-handler netty-resolver netty-transport \
         commons-lang3 commons-codec commons-validator commons-beanutils commons-digester commons-logging \
         commons-collections3 lz4-java zstd-jni; do
    CLIENT_CP+=":$LIB/$(basename "$(readlink -f "/usr/share/java/$j.jar")")"
done
CLIENT_CP+=":$LIB/snakeyaml-$SNAKEYAML_VERSION.jar"
ALL_CP="$OUT/conf:$LIB/*"

# what Java 9+ must open for 4.9's MappedFile cleaner, DirectBuffer, netty and fastjson
OPENS="--add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED"
OPENS+=" --add-opens=java.base/jdk.internal.ref=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED"
OPENS+=" --add-opens=java.base/java.lang.reflect=ALL-UNNAMED --add-opens=java.base/java.util=ALL-UNNAMED"
OPENS+=" --add-opens=java.base/jdk.internal.misc=ALL-UNNAMED --add-exports=java.base/sun.nio.ch=ALL-UNNAMED"
OPENS+=" -Dio.netty.tryReflectionSetAccessible=true"

cat > "$OUT/READY.tmp" <<EOF
# Apache RocketMQ $VERSION built by scripts/java_rocketmq.sh (javac over Debian's jars): source it.
# inputs: $INPUTS
export FASTMQ_JAVA_CLASSPATH='$CLIENT_CP'
export FASTMQ_ROCKETMQ_HOME='$OUT'
export FASTMQ_ROCKETMQ_CLASSPATH='$ALL_CP'
# (ROCKETMQ_HOME is set per command below, not exported: fastmq's servers read it too)
# JVM flags Java 9+ needs for 4.9.8 (MappedFile's cleaner, DirectBuffer, netty, fastjson):
export FASTMQ_ROCKETMQ_JAVA_OPENS='$OPENS'
#
# Start a NameServer + broker (ports and run dir as variables; heap: 4.9.8's runserver.sh gives
# 4g and runbroker.sh a fixed 8g heap + 15g direct memory, too much for this 2-core shared machine,
# so the broker gets 1g and its direct memory 1g; logs go to \$RUN/logs via -Duser.home):
#   NS_PORT=19876 BROKER_PORT=20911 RUN=\$(mktemp -d)
#   mkdir -p \$RUN/store && printf 'listenPort=%s\n' \$NS_PORT > \$RUN/namesrv.conf
#   printf '%s\n' brokerClusterName=DefaultCluster brokerName=broker-a brokerId=0 brokerRole=ASYNC_MASTER \\
#     flushDiskType=ASYNC_FLUSH autoCreateTopicEnable=true brokerIP1=127.0.0.1 namesrvAddr=127.0.0.1:\$NS_PORT \\
#     listenPort=\$BROKER_PORT storePathRootDir=\$RUN/store storePathCommitLog=\$RUN/store/commitlog > \$RUN/broker.conf
#   (the broker also listens on BROKER_PORT-2 (VIP channel) and BROKER_PORT+1 (HA): keep those free too)
#   ROCKETMQ_HOME=\$FASTMQ_ROCKETMQ_HOME nohup java -server -Xms256m -Xmx256m -XX:+UseG1GC \$FASTMQ_ROCKETMQ_JAVA_OPENS \\
#     -Duser.home=\$RUN -cp "\$FASTMQ_ROCKETMQ_CLASSPATH" org.apache.rocketmq.namesrv.NamesrvStartup -c \$RUN/namesrv.conf \\
#     > \$RUN/namesrv.out 2>&1 & echo \$! > \$RUN/namesrv.pid
#   ROCKETMQ_HOME=\$FASTMQ_ROCKETMQ_HOME nohup java -server -Xms1g -Xmx1g -Xmn512m -XX:MaxDirectMemorySize=1g \\
#     -XX:+UseG1GC -XX:G1HeapRegionSize=16m -XX:G1ReservePercent=25 -XX:InitiatingHeapOccupancyPercent=30 \\
#     -XX:SoftRefLRUPolicyMSPerMB=0 -XX:-OmitStackTraceInFastThrow \$FASTMQ_ROCKETMQ_JAVA_OPENS -Duser.home=\$RUN \\
#     -cp "\$FASTMQ_ROCKETMQ_CLASSPATH" org.apache.rocketmq.broker.BrokerStartup -c \$RUN/broker.conf \\
#     > \$RUN/broker.out 2>&1 & echo \$! > \$RUN/broker.pid
#   ready when \$RUN/broker.out says "The broker[broker-a, 127.0.0.1:\$BROKER_PORT] boot success";
#   then FASTMQ_JAVA_NAMESRV=127.0.0.1:\$NS_PORT
# Stop (broker first; it unregisters from the NameServer), then remove the run dir:
#   kill \$(cat \$RUN/broker.pid); while kill -0 \$(cat \$RUN/broker.pid) 2>/dev/null; do sleep 1; done
#   kill \$(cat \$RUN/namesrv.pid); rm -rf \$RUN
#
# A Java example (4.9.8's examples read the NameServer from -Drocketmq.namesrv.addr or NAMESRV_ADDR;
# the client logs to \$HOME/logs/rocketmqlogs unless -Duser.home=DIR):
#   java \$FASTMQ_ROCKETMQ_JAVA_OPENS -Duser.home=\$RUN -Drocketmq.namesrv.addr=127.0.0.1:\$NS_PORT -cp "\$FASTMQ_ROCKETMQ_CLASSPATH" \\
#     org.apache.rocketmq.example.transaction.TransactionProducer
#   (also ...example.quickstart.Producer / Consumer; ...example.benchmark.Producer -n 127.0.0.1:\$NS_PORT -t TOPIC -w 16 -s 128)
# The mqadmin tool: java \$FASTMQ_ROCKETMQ_JAVA_OPENS -cp "\$FASTMQ_ROCKETMQ_CLASSPATH" org.apache.rocketmq.tools.command.MQAdminStartup clusterList -n 127.0.0.1:\$NS_PORT
EOF
mv "$OUT/READY.tmp" "$OUT/READY"
say "built: $OUT (classes per module: $BUILD/classes, javac logs: $BUILD/*.javac.log)"
cat "$OUT/READY"
