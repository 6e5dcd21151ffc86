// NDB's parameter names of the node sections, one table per kind of section
// (declared in cluster_config.h).
#include "fjord/engine/cluster_config.h"

namespace fjord::engine {

// NDB's parameter names of each node section (the NDB Cluster manual's
// parameter reference). Those Fjord does not implement are accepted with a
// warning that they have no effect here. "Id", NDB's old name for NodeId, is
// not among them: ignoring it would give the node another id.
// clang-format off
const std::string_view kNdbDataNodeNames[] = {
    "ApiFailureHandlingTimeout", "Arbitration", "ArbitrationTimeout", "AutomaticThreadConfig", "BackupDataBufferSize",
    "BackupDataDir", "BackupDiskWriteSpeedPct", "BackupLogBufferSize", "BackupMaxWriteSize", "BackupMemory",
    "BackupReportFrequency", "BackupWriteSize", "BatchSizePerLocalScan", "BuildIndexThreads", "ClassicFragmentation",
    "CompressedBackup", "CompressedLCP", "ConnectCheckIntervalDelay", "CrashOnCorruptedTuple", "DataDir",
    "DataMemory", "DefaultHashMapSize", "DictTrace", "DiskDataUsingSameDisk", "DiskIOThreadPool", "Diskless",
    "DiskPageBufferEntries", "DiskPageBufferMemory", "DiskSyncSize", "EnableMultithreadedBackup", "EnablePartialLcp",
    "EnableRedoControl", "EncryptedFileSystem", "EventLogBufferSize", "ExecuteOnComputer", "ExtraSendBufferMemory",
    "FileSystemPath", "FileSystemPathDataFiles", "FileSystemPathDD", "FileSystemPathUndoFiles", "FragmentLogFileSize",
    "HeartbeatIntervalDbApi", "HeartbeatIntervalDbDb", "HeartbeatOrder", "HostName", "IndexMemory",
    "IndexStatAutoCreate", "IndexStatAutoUpdate", "IndexStatSaveScale", "IndexStatSaveSize", "IndexStatTriggerPct",
    "IndexStatTriggerScale", "IndexStatUpdateDelay", "InitFragmentLogFiles", "InitialLogFileGroup",
    "InitialNoOfOpenFiles", "InitialTablespace", "InsertRecoveryWork", "KeepAliveSendInterval", "LateAlloc",
    "LcpScanProgressTimeout", "LocationDomainId", "LockExecuteThreadToCPU", "LockMaintThreadsToCPU",
    "LockPagesInMainMemory", "LogLevelCheckpoint", "LogLevelCongestion", "LogLevelConnection", "LogLevelError",
    "LogLevelInfo", "LogLevelNodeRestart", "LogLevelShutdown", "LogLevelStartup", "LogLevelStatistic",
    "LongMessageBuffer", "MaxAllocate", "MaxBufferedEpochBytes", "MaxBufferedEpochs", "MaxDiskDataLatency",
    "MaxDiskWriteSpeed", "MaxDiskWriteSpeedOtherNodeRestart", "MaxDiskWriteSpeedOwnRestart",
    "MaxDMLOperationsPerTransaction", "MaxFKBuildBatchSize", "MaxLCPStartDelay", "MaxNoOfAttributes",
    "MaxNoOfConcurrentIndexOperations", "MaxNoOfConcurrentOperations", "MaxNoOfConcurrentScans",
    "MaxNoOfConcurrentSubOperations", "MaxNoOfConcurrentTransactions", "MaxNoOfExecutionThreads",
    "MaxNoOfFiredTriggers", "MaxNoOfLocalOperations", "MaxNoOfLocalScans", "MaxNoOfOpenFiles",
    "MaxNoOfOrderedIndexes", "MaxNoOfSavedMessages", "MaxNoOfSubscribers", "MaxNoOfSubscriptions", "MaxNoOfTables",
    "MaxNoOfTriggers", "MaxNoOfUniqueHashIndexes", "MaxParallelCopyInstances", "MaxParallelScansPerFragment",
    "MaxReorgBuildBatchSize", "MaxSendDelay", "MaxStartFailRetries", "MaxUIBuildBatchSize", "MemReportFrequency",
    "MinDiskWriteSpeed", "MinFreePct", "NodeGroup", "NodeGroupTransporters", "NodeId", "NoOfFragmentLogFiles",
    "NoOfFragmentLogParts", "NoOfReplicas", "Numa", "NumCPUs", "ODirect", "ODirectSyncFlag", "PartitionsPerNode",
    "RealtimeScheduler", "RecoveryWork", "RedoBuffer", "RedoOverCommitCounter", "RedoOverCommitLimit",
    "RequireEncryptedBackup", "ReservedConcurrentIndexOperations", "ReservedConcurrentOperations",
    "ReservedConcurrentScans", "ReservedConcurrentTransactions", "ReservedFiredTriggers", "ReservedLocalScans",
    "ReservedTransactionBufferMemory", "RestartOnErrorInsert", "RestartSubscriberConnectTimeout",
    "SchedulerExecutionTimer", "SchedulerResponsiveness", "SchedulerSpinTimer", "ServerPort", "SharedGlobalMemory",
    "SpinMethod", "StartFailRetryDelay", "StartFailureTimeout", "StartNoNodeGroupTimeout", "StartPartialTimeout",
    "StartPartitionedTimeout", "StartupStatusReportFrequency", "StopOnError", "StringMemory", "TcpBind_INADDR_ANY",
    "ThreadConfig", "TimeBetweenEpochs", "TimeBetweenEpochsTimeout", "TimeBetweenGlobalCheckpoints",
    "TimeBetweenGlobalCheckpointsTimeout", "TimeBetweenInactiveTransactionAbortCheck", "TimeBetweenLocalCheckpoints",
    "TimeBetweenWatchDogCheck", "TimeBetweenWatchDogCheckInitial", "TotalSendBufferMemory", "TransactionBufferMemory",
    "TransactionDeadlockDetectionTimeout", "TransactionInactiveTimeout", "TransactionMemory",
    "TwoPassInitialNodeRestartCopy", "UndoDataBuffer", "UndoIndexBuffer", "UseShm", "WatchDogImmediateKill"};
const std::size_t kNdbDataNodeNameCount = std::size(kNdbDataNodeNames);

const std::string_view kNdbApiNodeNames[] = {
    "ApiVerbose", "ArbitrationDelay", "ArbitrationRank", "AutoReconnect", "BatchByteSize", "BatchSize",
    "ConnectBackoffMaxTime", "ConnectionMap", "DefaultHashMapSize", "DefaultOperationRedoProblemAction",
    "ExecuteOnComputer", "ExtraSendBufferMemory", "HeartbeatThreadPriority", "HostName", "LocationDomainId",
    "MaxScanBatchSize", "NodeId", "StartConnectBackoffMaxTime", "TotalSendBufferMemory", "wan"};
const std::size_t kNdbApiNodeNameCount = std::size(kNdbApiNodeNames);

const std::string_view kNdbMgmNodeNames[] = {
    "ArbitrationDelay", "ArbitrationRank", "DataDir", "ExecuteOnComputer", "ExtraSendBufferMemory",
    "HeartbeatIntervalMgmdMgmd", "HeartbeatThreadPriority", "HostName", "LocationDomainId", "LogDestination",
    "MaxNoOfSavedEvents", "NodeId", "PortNumber", "PortNumberStats", "TotalSendBufferMemory", "wan"};
const std::size_t kNdbMgmNodeNameCount = std::size(kNdbMgmNodeNames);
// clang-format on

}  // namespace fjord::engine
