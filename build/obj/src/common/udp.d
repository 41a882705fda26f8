build/obj/src/common/udp.o: src/common/udp.c src/common/udp.h \
 src/common/wire.h include/incoll.h src/common/knobs.h src/common/log.h
src/common/udp.h:
src/common/wire.h:
include/incoll.h:
src/common/knobs.h:
src/common/log.h:
